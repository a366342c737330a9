package lualock

// A handle's owner field, and the hash field that counts its holds.

// Field returns the handle's owner field C:H, its field in the lock's hash
// and its entry in a fair lock's queue. The read and the write lock of a
// ReadWriteLock share one owner field; the write lock counts its holds in
// the field C:H:write.
func (l *Lock) Field() string { return l.field }

// countField is the lock hash's field that counts this handle's holds.
func (l *Lock) countField() string { return l.field + l.p.countSuffix }
