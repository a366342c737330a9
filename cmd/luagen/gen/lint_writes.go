package gen

// RuleReadOnlyWrite: a write command called by a script that declares it
// does not write (@flag read-only, a #!lua flags=no-writes shebang, or a
// Redis Function registered with the no-writes flag). Redis refuses the
// call at run time: "Write commands are not allowed from read-only
// scripts". Commands flagged may-replicate (PUBLISH, SPUBLISH, PFCOUNT)
// are refused too.
const RuleReadOnlyWrite = "read-only-write"

// writeCommands are the commands, in lower case, that Redis 7 flags write
// or may-replicate, which a read-only script may not call.
var writeCommands = setOf(
	// Generic.
	"copy", "del", "expire", "expireat", "migrate", "move", "persist",
	"pexpire", "pexpireat", "rename", "renamenx", "restore", "sort",
	"unlink", "flushall", "flushdb", "swapdb",
	// Strings and bitmaps.
	"append", "bitfield", "bitop", "decr", "decrby", "getdel", "getex",
	"getset", "incr", "incrby", "incrbyfloat", "mset", "msetnx", "psetex",
	"set", "setbit", "setex", "setnx", "setrange",
	// Hashes.
	"hdel", "hexpire", "hexpireat", "hgetdel", "hgetex", "hincrby",
	"hincrbyfloat", "hmset", "hpersist", "hpexpire", "hpexpireat", "hset",
	"hsetex", "hsetnx",
	// Lists.
	"blmove", "blmpop", "blpop", "brpop", "brpoplpush", "linsert", "lmove",
	"lmpop", "lpop", "lpush", "lpushx", "lrem", "lset", "ltrim", "rpop",
	"rpoplpush", "rpush", "rpushx",
	// Sets.
	"sadd", "sdiffstore", "sinterstore", "smove", "spop", "srem",
	"sunionstore",
	// Sorted sets.
	"bzmpop", "bzpopmax", "bzpopmin", "zadd", "zdiffstore", "zincrby",
	"zinterstore", "zmpop", "zpopmax", "zpopmin", "zrangestore", "zrem",
	"zremrangebylex", "zremrangebyrank", "zremrangebyscore", "zunionstore",
	// Streams.
	"xack", "xadd", "xautoclaim", "xclaim", "xdel", "xgroup", "xsetid",
	"xtrim",
	// HyperLogLog and geo.
	"pfadd", "pfcount", "pfdebug", "pfmerge", "geoadd", "georadius",
	"georadiusbymember", "geosearchstore",
	// may-replicate.
	"publish", "spublish",
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
