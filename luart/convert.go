package luart

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Convert turns the reply of a script into a wrapper's typed result with f,
// naming the script in every error, once: an *Error of the script (from
// Run) is returned as is, and any other error, or f's, comes wrapped in
// one. A nil reply (redis.Nil) reaches f as nil.
func Convert[T any](s *Script, v any, err error, f func(any) (T, error)) (T, error) {
	var zero T
	if e, ok := err.(*Error); ok && e.Script == s.Name {
		return zero, err
	}
	if errors.Is(err, redis.Nil) {
		v, err = nil, nil
	}
	if err == nil {
		var r T
		if r, err = f(v); err == nil {
			return r, nil
		}
	}
	return zero, &Error{Script: s.Name, Err: err}
}

// AsNil accepts any reply: the script declares none (@return nil).
func AsNil(any) (struct{}, error) { return struct{}{}, nil }

// AsInt converts an integer reply.
func AsInt(v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("reply %#v, want an integer", v)
	}
	return n, nil
}

// AsString converts a bulk string or status reply.
func AsString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("reply %#v, want a string", v)
	}
	return s, nil
}

// AsBool converts Lua's true (integer 1) and false (nil).
func AsBool(v any) (bool, error) {
	switch v := v.(type) {
	case nil:
		return false, nil
	case int64:
		return v != 0, nil
	}
	return false, fmt.Errorf("reply %#v, want a boolean", v)
}

// AsAny returns the reply as go-redis decoded it.
func AsAny(v any) (any, error) { return v, nil }

// Nullable lets f's reply be nil: a nil reply converts to a nil pointer.
func Nullable[T any](f func(any) (T, error)) func(any) (*T, error) {
	return func(v any) (*T, error) {
		if v == nil {
			return nil, nil
		}
		r, err := f(v)
		if err != nil {
			return nil, err
		}
		return &r, nil
	}
}

// ArrayOf converts an array reply element by element with f; a nil reply is
// an empty (nil) slice.
func ArrayOf[T any](f func(any) (T, error)) func(any) ([]T, error) {
	return func(v any) ([]T, error) {
		if v == nil {
			return nil, nil
		}
		items, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("reply %#v, want an array", v)
		}
		out := make([]T, len(items))
		for i, item := range items {
			r, err := f(item)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i+1, err)
			}
			out[i] = r
		}
		return out, nil
	}
}
