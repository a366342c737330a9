package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/internal/keys"
)

func runUnlock(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("unlock", "-force [-addr URL] [-fair] [-pubsub KIND] NAME", stderr)
	addr := addrFlag(fs)
	pubsub := newPubsubFlag(fs)
	deploy := newDeployFlags(fs)
	force := fs.Bool("force", false, "required: delete the lock whoever holds it")
	fair := fs.Bool("fair", false, "NAME is a fair (FIFO) lock: wake its first waiter (default: when NAME has a queue)")
	name, code := parseFlags(fs, args, stdout, nil)
	if code >= 0 {
		return code
	}
	if !*force {
		return usagef(stderr, "unlock: only the holder can release a lock normally (the holder's \"lualock lock\" releases it when its command exits); "+
			"pass -force to delete lock %s whoever holds it", name)
	}
	if err := lualock.CheckName(name); err != nil {
		return usagef(stderr, "unlock: %v", clean(err))
	}
	opts, _, err := redisOptions(fs, *addr)
	if err != nil {
		return usagef(stderr, "unlock: bad -addr: %v", err)
	}
	copts, err := clientOptions(pubsub)
	if err == nil {
		err = deploy.options(&copts)
	}
	if err == nil {
		_, err = deploy.failover(opts)
	}
	if err != nil {
		return usagef(stderr, "unlock: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	rdb, err := deploy.dial(ctx, opts, time.Time{}, time.Time{})
	if err != nil {
		return errorf(stderr, exitError, "%v", err)
	}
	defer rdb.Close()
	client, err := lualock.New(rdb, copts)
	if err != nil {
		return errorf(stderr, exitError, "%v", clean(err))
	}
	defer client.Close()
	if !*fair {
		// A fair lock has a queue: wake its head as the fair release does.
		n, err := rdb.Exists(ctx, keys.Of(name).Queue).Result()
		if err != nil {
			return errorf(stderr, exitError, "%v", err)
		}
		*fair = n == 1
	}
	// A read-write lock (a hash with a mode) is force-unlocked as one, in
	// its mode; a key of another type or shape goes to the lock's script,
	// which leaves it as it is and says what it is (ErrWrongType). Each
	// script checks the shape again, atomically.
	lock := newLock(client, name, *fair)
	switch mode, err := rdb.HGet(ctx, name, "mode").Result(); {
	case err == nil && mode == "read":
		lock = client.NewReadWriteLock(name).ReadLock()
	case err == nil && mode == "write":
		lock = client.NewReadWriteLock(name).WriteLock()
	case err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "WRONGTYPE"):
		return errorf(stderr, exitError, "%v", err)
	}
	deleted, err := lock.ForceUnlock(ctx)
	switch {
	case errors.Is(err, lualock.ErrInvalid):
		return usagef(stderr, "unlock: %v", clean(err))
	case err != nil:
		return errorf(stderr, exitError, "%v", clean(err))
	case deleted:
		fmt.Fprintf(stdout, "lualock: lock %s force-unlocked (deleted)\n", name)
	default:
		fmt.Fprintf(stdout, "lualock: lock %s was not locked: nothing deleted\n", name)
	}
	return exitOK
}
