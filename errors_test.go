package lualock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lualock/lualock"
)

func TestError_shape(t *testing.T) {
	cause := fmt.Errorf("%w within 1s (last error: %w)", lualock.ErrNotObtained, context.DeadlineExceeded)
	var err error = &lualock.Error{Op: "lock", Lock: "a b", Err: cause}
	if got, want := err.Error(), `lualock: lock "a b": lock not obtained within 1s (last error: context deadline exceeded)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, lualock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is does not see through %v", err)
	}
	var e *lualock.Error
	if !errors.As(fmt.Errorf("wrapped: %w", err), &e) || e.Op != "lock" || e.Lock != "a b" {
		t.Errorf("errors.As: %+v", e)
	}
}

func TestLock_errors_shape(t *testing.T) {
	_, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{})
	ctx := context.Background()
	l := c.NewLock("shape")
	for _, tc := range []struct {
		op   string
		err  error
		want error
	}{
		{"unlock", l.Unlock(ctx), lualock.ErrNotHeld},
		{"lock", l.TryLock(ctx, -1), lualock.ErrInvalid},
		{"lock", c.NewLock("").Lock(ctx), lualock.ErrInvalid},
		{"status", func() error { _, err := c.NewLock("shape2").RemainingLease(ctx); return err }(), lualock.ErrNotLocked},
	} {
		var e *lualock.Error
		if !errors.As(tc.err, &e) || e.Op != tc.op || !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v (%T), want an *Error of %q wrapping %v", tc.op, tc.err, tc.err, tc.op, tc.want)
		}
	}
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	err := c.NewLock("shape").TryLock(ctx, 0)
	var e *lualock.Error
	if !errors.As(err, &e) || e.Op != "lock" || e.Lock != "shape" || !errors.Is(err, lualock.ErrNotObtained) {
		t.Errorf("TryLock on a held lock: %v", err)
	}
}
