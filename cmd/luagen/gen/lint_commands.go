package gen

// KeySpec says which arguments of a Redis command are keys, counting the
// arguments after the command name from 1, as COMMAND INFO does.
type KeySpec struct {
	// First is the position of the first key; 0 when the command takes no key.
	First int
	// Last is the position of the last key. A negative value counts from the
	// end: -1 is the last argument, -2 the one before it.
	Last int
	// Step is the distance between two keys: 2 for MSET key value key value.
	Step int
}

// positions lists the key positions of a call with nargs arguments after the
// command name.
func (k KeySpec) positions(nargs int) []int {
	if k.First <= 0 {
		return nil
	}
	last := k.Last
	if last < 0 {
		last = nargs + 1 + last
	}
	step := max(k.Step, 1)
	var out []int
	for p := k.First; p <= last && p <= nargs; p += step {
		out = append(out, p)
	}
	return out
}

var (
	ksNone       = KeySpec{}
	ksOne        = KeySpec{First: 1, Last: 1, Step: 1}
	ksTwo        = KeySpec{First: 1, Last: 2, Step: 1}
	ksAll        = KeySpec{First: 1, Last: -1, Step: 1}
	ksAllButLast = KeySpec{First: 1, Last: -2, Step: 1} // key [key ...] timeout
	ksSecond     = KeySpec{First: 2, Last: 2, Step: 1}  // subcommand key
)

// CommandKeys maps a Redis command, in lower case, to the positions of its
// keys. The non-key-argument rule checks that every key a script passes to
// redis.call or redis.pcall comes from KEYS. A command missing from the table
// is not checked, nor are commands whose keys follow a count (EVAL-like
// numkeys, ZUNION, LMPOP, XREAD ... STREAMS): only their first key, when its
// position is fixed, is listed.
var CommandKeys = map[string]KeySpec{
	// Commands without keys.
	"dbsize": ksNone, "echo": ksNone, "flushall": ksNone, "flushdb": ksNone,
	"info": ksNone, "keys": ksNone, "lastsave": ksNone, "ping": ksNone,
	"publish": ksNone, "pubsub": ksNone, "randomkey": ksNone, "scan": ksNone,
	"select": ksNone, "spublish": ksNone, "time": ksNone,

	// Generic.
	"copy": ksTwo, "del": ksAll, "dump": ksOne, "exists": ksAll,
	"expire": ksOne, "expireat": ksOne, "expiretime": ksOne, "move": ksOne,
	"object": ksSecond, "persist": ksOne, "pexpire": ksOne,
	"pexpireat": ksOne, "pexpiretime": ksOne, "pttl": ksOne,
	"rename": ksTwo, "renamenx": ksTwo, "restore": ksOne, "sort": ksOne,
	"sort_ro": ksOne, "touch": ksAll, "ttl": ksOne, "type": ksOne,
	"unlink": ksAll,

	// Strings and bitmaps.
	"append": ksOne, "bitcount": ksOne, "bitfield": ksOne,
	"bitfield_ro": ksOne, "bitop": {First: 2, Last: -1, Step: 1},
	"bitpos": ksOne, "decr": ksOne, "decrby": ksOne, "get": ksOne,
	"getbit": ksOne, "getdel": ksOne, "getex": ksOne, "getrange": ksOne,
	"getset": ksOne, "incr": ksOne, "incrby": ksOne, "incrbyfloat": ksOne,
	"lcs": ksTwo, "mget": ksAll, "mset": {First: 1, Last: -1, Step: 2},
	"msetnx": {First: 1, Last: -1, Step: 2}, "psetex": ksOne, "set": ksOne,
	"setbit": ksOne, "setex": ksOne, "setnx": ksOne, "setrange": ksOne,
	"strlen": ksOne, "substr": ksOne,

	// Hashes.
	"hdel": ksOne, "hexists": ksOne, "hexpire": ksOne, "hexpireat": ksOne,
	"hexpiretime": ksOne, "hget": ksOne, "hgetall": ksOne, "hgetdel": ksOne,
	"hgetex": ksOne, "hincrby": ksOne, "hincrbyfloat": ksOne, "hkeys": ksOne,
	"hlen": ksOne, "hmget": ksOne, "hmset": ksOne, "hpersist": ksOne,
	"hpexpire": ksOne, "hpexpireat": ksOne, "hpexpiretime": ksOne,
	"hpttl": ksOne, "hrandfield": ksOne, "hscan": ksOne, "hset": ksOne,
	"hsetex": ksOne, "hsetnx": ksOne, "hstrlen": ksOne, "httl": ksOne,
	"hvals": ksOne,

	// Lists.
	"blmove": ksTwo, "blpop": ksAllButLast, "brpop": ksAllButLast,
	"brpoplpush": ksTwo, "lindex": ksOne, "linsert": ksOne, "llen": ksOne,
	"lmove": ksTwo, "lpop": ksOne, "lpos": ksOne, "lpush": ksOne,
	"lpushx": ksOne, "lrange": ksOne, "lrem": ksOne, "lset": ksOne,
	"ltrim": ksOne, "rpop": ksOne, "rpoplpush": ksTwo, "rpush": ksOne,
	"rpushx": ksOne,

	// Sets.
	"sadd": ksOne, "scard": ksOne, "sdiff": ksAll, "sdiffstore": ksAll,
	"sinter": ksAll, "sinterstore": ksAll, "sismember": ksOne,
	"smembers": ksOne, "smismember": ksOne, "smove": ksTwo, "spop": ksOne,
	"srandmember": ksOne, "srem": ksOne, "sscan": ksOne, "sunion": ksAll,
	"sunionstore": ksAll,

	// Sorted sets.
	"bzpopmax": ksAllButLast, "bzpopmin": ksAllButLast, "zadd": ksOne,
	"zcard": ksOne, "zcount": ksOne, "zdiffstore": ksOne, "zincrby": ksOne,
	"zinterstore": ksOne, "zlexcount": ksOne, "zmscore": ksOne,
	"zpopmax": ksOne, "zpopmin": ksOne, "zrandmember": ksOne,
	"zrange": ksOne, "zrangebylex": ksOne, "zrangebyscore": ksOne,
	"zrangestore": ksTwo, "zrank": ksOne, "zrem": ksOne,
	"zremrangebylex": ksOne, "zremrangebyrank": ksOne,
	"zremrangebyscore": ksOne, "zrevrange": ksOne, "zrevrangebylex": ksOne,
	"zrevrangebyscore": ksOne, "zrevrank": ksOne, "zscan": ksOne,
	"zscore": ksOne, "zunionstore": ksOne,

	// Streams.
	"xack": ksOne, "xadd": ksOne, "xautoclaim": ksOne, "xclaim": ksOne,
	"xdel": ksOne, "xgroup": ksSecond, "xinfo": ksSecond, "xlen": ksOne,
	"xpending": ksOne, "xrange": ksOne, "xrevrange": ksOne, "xsetid": ksOne,
	"xtrim": ksOne,

	// HyperLogLog and geo.
	"pfadd": ksOne, "pfcount": ksAll, "pfmerge": ksAll, "geoadd": ksOne,
	"geodist": ksOne, "geohash": ksOne, "geopos": ksOne,
	"georadius": ksOne, "georadius_ro": ksOne, "georadiusbymember": ksOne,
	"georadiusbymember_ro": ksOne, "geosearch": ksOne,
	"geosearchstore": ksTwo,
}
