package lualock

import (
	"fmt"
	"strings"
)

// maxNameLen bounds lock names: Redis would take more, but a name this long
// is a bug in the caller.
const maxNameLen = 64 << 10

// Key prefixes of the protocol (../shared/docs/PROTOCOL.md), as Redisson
// spells them.
const (
	channelPrefix = "redisson_lock__channel"
	latchPrefix   = "redisson_unlock_latch"
	queuePrefix   = "redisson_lock_queue"
	timeoutPrefix = "redisson_lock_timeout"
)

// tag names a key of lock name so that it shares the lock's cluster slot:
// prefix:{name}, or prefix:name when name carries its own hash tag
// (checkName refuses a name with a brace but no hash tag, whose keys would
// not share a slot: Redisson's names have the same flaw).
func tag(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty lock name", ErrInvalid)
	case len(name) > maxNameLen:
		return fmt.Errorf("%w: lock name is %d bytes, at most %d allowed", ErrInvalid, len(name), maxNameLen)
	case strings.ContainsAny(name, "{}") && !hasHashTag(name):
		return fmt.Errorf("%w: lock name %q has a brace but no hash tag ({x} with x not empty): its keys would land in different cluster slots", ErrInvalid, name)
	}
	return nil
}

// hasHashTag reports whether key has a Redis Cluster hash tag: a "{"
// followed, later, by a "}" with at least one byte between them.
func hasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(key[i+1:], '}')
	return j > 0
}
