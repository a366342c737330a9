// Package rdb is a task queue's Redis layer, written for luagen import's
// tests in the idioms of such packages (asynq's internal/rdb): scripts as
// redis.NewScript of raw strings, KEYS and ARGV documented in comments,
// locals naming them in some scripts and not in others.
package rdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RDB wraps a client.
type RDB struct {
	client redis.UniversalClient
}

func taskKey(qname, id string) string   { return fmt.Sprintf("asynq:{%s}:t:%s", qname, id) }
func pendingKey(qname string) string    { return fmt.Sprintf("asynq:{%s}:pending", qname) }
func activeKey(qname string) string     { return fmt.Sprintf("asynq:{%s}:active", qname) }
func leaseKey(qname string) string      { return fmt.Sprintf("asynq:{%s}:lease", qname) }
func scheduledKey(qname string) string  { return fmt.Sprintf("asynq:{%s}:scheduled", qname) }
func pausedKey(qname string) string     { return fmt.Sprintf("asynq:{%s}:paused", qname) }
func taskKeyPrefix(qname string) string { return fmt.Sprintf("asynq:{%s}:t:", qname) }

// KEYS[1] -> asynq:{<qname>}:t:<task_id>
// KEYS[2] -> asynq:{<qname>}:pending
// ARGV[1] -> task message data
// ARGV[2] -> task ID
// ARGV[3] -> current unix time in nsec
var enqueueCmd = redis.NewScript(`
if redis.call("EXISTS", KEYS[1]) == 1 then
	return 0
end
redis.call("HSET", KEYS[1],
           "msg", ARGV[1],
           "state", "pending",
           "pending_since", ARGV[3])
redis.call("LPUSH", KEYS[2], ARGV[2])
return 1
`)

// Enqueue adds a task.
func (r *RDB) Enqueue(ctx context.Context, qname, id string, encoded []byte) error {
	keys := []string{
		taskKey(qname, id),
		pendingKey(qname),
	}
	argv := []interface{}{
		encoded,
		id,
		time.Now().UnixNano(),
	}
	n, err := enqueueCmd.Run(ctx, r.client, keys, argv...).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("task id conflicts")
	}
	return nil
}

const dequeueSrc = `
if redis.call("EXISTS", KEYS[2]) == 0 then
	local id = redis.call("RPOPLPUSH", KEYS[1], KEYS[3])
	if id then
		local key = ARGV[2] .. id
		redis.call("HSET", key, "state", "active")
		redis.call("HDEL", key, "pending_since")
		redis.call("ZADD", KEYS[4], ARGV[1], id)
		return {id, redis.call("HGET", key, "msg")}
	end
end
return nil`

var dequeueCmd = redis.NewScript(dequeueSrc)

// Dequeue takes a task.
func (r *RDB) Dequeue(ctx context.Context, qname string, leaseExpiry time.Time) ([]interface{}, error) {
	keys := []string{
		pendingKey(qname),
		pausedKey(qname),
		activeKey(qname),
		leaseKey(qname),
	}
	argv := []interface{}{
		leaseExpiry.Unix(),
		taskKeyPrefix(qname),
	}
	return dequeueCmd.Run(ctx, r.client, keys, argv...).Slice()
}

var forwardCmd = redis.NewScript(`
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, 100)
for _, id in ipairs(ids) do
	local taskKey = ARGV[2] .. id
	redis.call("LPUSH", KEYS[2], id)
	redis.call("ZREM", KEYS[1], id)
	redis.call("HSET", taskKey, "state", "pending")
end
return table.getn(ids)`)

// Forward moves due tasks.
func (r *RDB) Forward(ctx context.Context, qname string, now time.Time) (int, error) {
	res, err := forwardCmd.Run(ctx, r.client, []string{scheduledKey(qname), pendingKey(qname)}, now.Unix(), taskKeyPrefix(qname)).Int()
	return res, err
}

var pauseCmd = redis.NewScript(`
local paused = KEYS[1]
local at = ARGV[1]
if redis.call("EXISTS", paused) == 1 then
	return redis.error_reply("ALREADY PAUSED")
end
return redis.call("SET", paused, at)`)

// Pause pauses a queue.
func (r *RDB) Pause(ctx context.Context, qname string) error {
	return pauseCmd.Run(ctx, r.client, []string{pausedKey(qname)}, time.Now().Unix()).Err()
}

var extendLeaseCmd = redis.NewScript(`
local lease = KEYS[1]
local expire = tonumber(ARGV[1])
for i = 2, #ARGV do
	redis.call("ZADD", lease, expire, ARGV[i])
end
return #ARGV - 1`)

// ExtendLease extends the leases of tasks.
func (r *RDB) ExtendLease(ctx context.Context, qname string, expiry time.Time, ids ...string) (int64, error) {
	argv := []interface{}{expiry.Unix()}
	for _, id := range ids {
		argv = append(argv, id)
	}
	return extendLeaseCmd.Run(ctx, r.client, []string{leaseKey(qname)}, argv...).Int64()
}

// Size reads a queue's size with an inline script.
func (r *RDB) Size(ctx context.Context, qname string) (int64, error) {
	return r.client.Eval(ctx, `return redis.call("LLEN", KEYS[1]) + redis.call("ZCARD", KEYS[2])`,
		[]string{pendingKey(qname), scheduledKey(qname)}).Int64()
}

// PauseCount counts paused queues: a script run with EvalRO on a constant.
const countPausedSrc = `local n = 0
for _, k in ipairs(KEYS) do
	n = n + redis.call("EXISTS", k)
end
return n`

// CountPaused counts the paused queues among qnames.
func (r *RDB) CountPaused(ctx context.Context, qnames []string) (int64, error) {
	var keys []string
	for _, q := range qnames {
		keys = append(keys, pausedKey(q))
	}
	return r.client.EvalRO(ctx, countPausedSrc, keys).Int64()
}
