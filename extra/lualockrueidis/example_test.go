package lualockrueidis_test

import (
	"context"
	"log"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/extra/lualockrueidis"
)

// Example sends lualock's scripts through a rueidis client on the Redis of
// the go-redis client, which lualock keeps for pub/sub, renewals and the
// hold tracker. The deferred calls close lualock before either client.
func Example() {
	ctx := context.Background()
	const addr = "127.0.0.1:6379"
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	client, err := lualock.New(rdb, lualock.Options{Scripter: lualockrueidis.Scripter(rc)})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	lock := client.NewLock("reports:daily")
	if err := lock.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	// ... the job ...
}
