// Package keys is the key schema of lualock's primitives: every key and
// channel name derived from a lock's name, as Redisson spells them
// (docs/PROTOCOL.md and docs/PROTOCOL-PRIMITIVES.md), in one place that the runtime and the
// lualock command both use.
package keys

import (
	"errors"
	"fmt"
	"strings"
)

// MaxName bounds lock names: Redis would take more, but a name this long is
// a bug in the caller.
const MaxName = 64 << 10

// Key prefixes of the protocol, as Redisson spells them, and the lualock
// command's own holder prefix.
const (
	ChannelPrefix     = "redisson_lock__channel"
	UnlockLatchPrefix = "redisson_unlock_latch" // a lock release's unlock latch: tag(prefix, N) + ":" + C + ":" + request
	QueuePrefix       = "redisson_lock_queue"
	TimeoutPrefix     = "redisson_lock_timeout"
	HolderPrefix      = "lualock_holder"

	// The read-write and fenced locks (PROTOCOL-PRIMITIVES.md sections 2 and 3).
	RWLockPrefix = "redisson_rwlock"     // the read-write lock's channel
	TokenPrefix  = "redisson_lock_token" // the fenced lock's token counter
)

// The semaphores and the count-down latch (PROTOCOL-PRIMITIVES.md sections 4
// to 6): Redisson's channels, and the keys only lualock uses (Redisson's
// clients never read them).
const (
	SemaphoreChannelPrefix      = "redisson_sc"
	CountDownLatchChannelPrefix = "redisson_countdownlatch__channel__"
	RequestLatchPrefix          = "lualock_request" // the unlock latch of a semaphore's or a count-down latch's call: tag(prefix, N) + ":" + request
	ClaimPrefix                 = "lualock_semaphore_claim"
)

// RWTimeoutPrefix is the prefix P of a read-write lock's read hold timeout
// keys, P:C:H:rwlock_timeout:i: {name}, or name itself when it has a hash
// tag, so that they share the lock's slot.
func RWTimeoutPrefix(name string) string {
	if HasHashTag(name) {
		return name
	}
	return "{" + name + "}"
}

// Suffix is Redisson's suffixName: name's key with suffix, in name's slot
// (RWTimeoutPrefix(name) + ":" + suffix), as the permit-expirable
// semaphore's timeout set.
func Suffix(name, suffix string) string { return RWTimeoutPrefix(name) + ":" + suffix }

// Lock is the keys of one lock name: the reentrant lock uses Name and
// Channel; the fair lock adds Queue and Timeouts. (Its unlock latches are
// tag(UnlockLatchPrefix, Name) + ":" + C + ":" + request.)
type Lock struct {
	Name     string // the lock's hash
	Channel  string // its release channel
	Queue    string // the fair lock's queue of waiters
	Timeouts string // the fair lock's sorted set of waiters' deadlines
}

// Of returns the keys of lock name.
func Of(name string) Lock {
	return Lock{
		Name:     name,
		Channel:  Tag(ChannelPrefix, name),
		Queue:    Tag(QueuePrefix, name),
		Timeouts: Tag(TimeoutPrefix, name),
	}
}

// WaiterChannel is the channel on which the fair lock wakes the waiter
// field: the lock's channel, ":" and the field.
func (k Lock) WaiterChannel(field string) string { return k.Channel + ":" + field }

// Holder is the key in which a lualock process tells who it is while it
// holds lock name as field.
func Holder(name, field string) string { return Tag(HolderPrefix, name) + ":" + field }

// Tag names a key of lock name so that it shares the lock's cluster slot:
// prefix:{name}, or prefix:name when name carries its own hash tag (Check
// refuses a name with a brace but no hash tag, whose keys would not share a
// slot: Redisson's names have the same flaw).
func Tag(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// ErrName is wrapped by every error of Check.
var ErrName = errors.New("bad lock name")

// Check returns why the locks refuse name (empty, over MaxName bytes, or
// with a brace but no hash tag), or nil. The error's text is the reason
// alone; it wraps ErrName.
func Check(name string) error {
	switch {
	case name == "":
		return nameError{"empty lock name"}
	case len(name) > MaxName:
		return nameError{fmt.Sprintf("lock name is %d bytes, at most %d allowed", len(name), MaxName)}
	case strings.ContainsAny(name, "{}") && !HasHashTag(name):
		return nameError{fmt.Sprintf("lock name %q has a brace but no hash tag ({x} with x not empty): its keys would land in different cluster slots", name)}
	}
	return nil
}

type nameError struct{ reason string }

func (e nameError) Error() string { return e.reason }
func (e nameError) Unwrap() error { return ErrName }

// HasHashTag reports whether key has a Redis Cluster hash tag: a "{"
// followed, later, by a "}" with at least one byte between them.
func HasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(key[i+1:], '}')
	return j > 0
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the text between the first "{" and the next "}",
// when not empty), modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crcTable[byte(c>>8)^s[i]]
	}
	return c
}
