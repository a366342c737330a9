package lualock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lualock/lualock"
)

func TestError_shape(t *testing.T) {
	cause := fmt.Errorf("%w within 1s (last error: %w)", lualock.ErrNotObtained, context.DeadlineExceeded)
	var err error = &lualock.Error{Op: "lock", Name: "a b", Err: cause}
	if got, want := err.Error(), `lualock: lock "a b": not obtained within 1s (last error: context deadline exceeded)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, lualock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is does not see through %v", err)
	}
	var e *lualock.Error
	if !errors.As(fmt.Errorf("wrapped: %w", err), &e) || e.Op != "lock" || e.Name != "a b" {
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
	if !errors.As(err, &e) || e.Op != "lock" || e.Name != "shape" || !errors.Is(err, lualock.ErrNotObtained) {
		t.Errorf("TryLock on a held lock: %v", err)
	}
}

// TestError_eachFactOnce: a refused upgrade and a multi-lock whose member
// is taken print the operation, the name and the reason once each.
func TestError_eachFactOnce(t *testing.T) {
	_, rdb := lkMini(t)
	c := lkClient(t, rdb, lualock.Options{})
	ctx := context.Background()

	rw := c.NewReadWriteLock("rw")
	if err := rw.ReadLock().Lock(ctx); err != nil {
		t.Fatal(err)
	}
	up := rw.WriteLock().TryLock(ctx, 0)
	if !errors.Is(up, lualock.ErrUpgrade) {
		t.Fatalf("upgrade: %v, want ErrUpgrade", up)
	}
	if !strings.HasPrefix(up.Error(), `lualock: lock "rw": no upgrade from a read hold to the write lock: owner `) ||
		strings.Count(up.Error(), "lualock") != 1 || strings.Count(up.Error(), "upgrade") != 1 {
		t.Errorf("upgrade prints %q", up.Error())
	}

	if err := c.NewLock("b").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	err := c.NewMultiLock(c.NewLock("a"), c.NewLock("b")).TryLock(ctx, 0)
	if !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("multi-lock: %v, want ErrNotObtained", err)
	}
	if want := `lualock: lock "a+b": member "b": not obtained`; !strings.HasPrefix(err.Error(), want) ||
		strings.Count(err.Error(), "lualock") != 1 || strings.Count(err.Error(), "lock") != 2 {
		t.Errorf("multi-lock prints %q, want it to begin %q and say each fact once", err.Error(), want)
	}
}
