package lualock

import (
	"fmt"

	"github.com/lualock/lualock/internal/keys"
)

// CheckName returns ErrInvalid, with the reason, for a name that the locks
// refuse (empty, over 64 KiB, or with a brace but no hash tag), and nil for
// one they take. Tools that read a lock's keys themselves, such as the
// lualock command's status, use it to refuse what Lock would refuse, before
// anything is sent to Redis.
func CheckName(name string) error {
	if err := keys.Check(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Field returns the handle's owner field C:H, its field in the lock's hash
// and its entry in a fair lock's queue. The read and the write lock of a
// ReadWriteLock share one owner field; the write lock counts its holds in
// the field C:H:write.
func (l *Lock) Field() string { return l.field }

// countField is the lock hash's field that counts this handle's holds.
func (l *Lock) countField() string { return l.field + l.p.countSuffix }
