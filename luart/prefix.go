package luart

import (
	"errors"
	"fmt"
	"strings"
)

// ErrKeyPrefix is the cause of the error a generated script function
// returns, with nothing sent, when an arg that carries a key prefix holds
// no hash tag, or a key of the call holds another (luagen.json
// keyPrefixArgs with checkKeyPrefixes): the keys the script derives from
// the prefix would be in another slot.
var ErrKeyPrefix = errors.New("key prefix without the hash tag of the call's keys")

// CheckKeyPrefix checks the key-prefix arg named arg, whose value is
// prefix, against the keys of the call: the prefix must hold a hash tag and
// every key the same one. The error wraps ErrKeyPrefix.
func CheckKeyPrefix(arg, prefix string, keys []string) error {
	tag, ok := hashTag(prefix)
	if !ok {
		return fmt.Errorf("arg %s %q holds no hash tag {...}: %w", arg, prefix, ErrKeyPrefix)
	}
	for _, k := range keys {
		if t, ok := hashTag(k); !ok || t != tag {
			return fmt.Errorf("arg %s %q has the hash tag {%s}, key %q another: %w", arg, prefix, tag, k, ErrKeyPrefix)
		}
	}
	return nil
}

// hashTag returns the hash tag of a key as Redis Cluster reads it: the text
// between the first "{" and the first "}" after it, when not empty.
func hashTag(s string) (string, bool) {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(s[i+1:], '}')
	if j <= 0 {
		return "", false
	}
	return s[i+1 : i+1+j], true
}
