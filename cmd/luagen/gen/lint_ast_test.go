package gen

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// Headers of the test scripts. h0 declares nothing, so a body starts on
// line 2; h1 declares one key and one arg, so a body starts on line 4.
const (
	h0 = "-- @return nil\n"
	h1 = "-- @key lock the lock\n-- @arg field string the owner\n-- @return int\n"
	// hv declares a key and variadic keys, and two args.
	hv = "-- @key first the first lock\n-- @key rest... the other locks\n-- @arg a string one\n-- @arg b string two\n-- @return nil\n"
)

// lintSource lints one script given as text and fails the test on header
// findings, which would mean the test script itself is wrong.
func lintSource(t *testing.T, src string) []Diagnostic {
	t.Helper()
	s, ds := parseScript("lua/t.lua", []byte(src))
	if s == nil {
		t.Fatalf("parseScript returned no script: %v", ds)
	}
	for _, d := range ds {
		t.Fatalf("header finding in the test script: %v", d)
	}
	return lintAST(s, Config{})
}

// brief formats findings as "rule line:col", in order.
func brief(ds []Diagnostic) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s %d:%d", d.Rule, d.Line, d.Col))
	}
	return out
}

func TestLintASTRules(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "rule line:col" of every finding, sorted by position
	}{
		// syntax
		{"syntax error", h0 + "x = = 1", []string{"syntax 2:5"}},
		{"syntax error at a keyword", h0 + "local x = \nif x then end", []string{"syntax 3:1"}},
		{"syntax only finding", h0 + "x = foo\ny = = 1\ngoto l", []string{"syntax 3:5"}},
		{"syntax at EOF on the last line", h0 + "if true then\n  return 1\n", []string{"syntax 3:11"}},
		{"syntax at EOF without final newline", h0 + "local x = 1 +", []string{"syntax 2:14"}},
		{"syntax unterminated string", h0 + "local s = 'abc\nreturn s", []string{"syntax 2:11"}},
		{"syntax unterminated long string", h0 + "local s = [[abc\n\nreturn s\n", []string{"syntax 4:9"}},
		{"syntax fine", h0 + "local x = 1\nreturn x", nil},
		// malformed numbers, which gopher-lua's parser partly takes and
		// Redis's Lua 5.1 refuses
		{"malformed exponent", h0 + "return 1e", []string{"syntax 2:8"}},
		{"malformed exponent sign", h0 + "local x = 1e+\nreturn x", []string{"syntax 2:11"}},
		{"malformed exponent before a name", h0 + "local x = 1e y = 2\nreturn x", []string{"syntax 2:11"}},
		{"malformed double dot", h0 + "return 1..2", []string{"syntax 2:8"}},
		{"malformed letters", h0 + "return 12abc", []string{"syntax 2:8"}},
		{"malformed hexadecimal", h0 + "return 0x", []string{"syntax 2:8"}},
		{"malformed number before a syntax error", h0 + "local x = 1e\nlocal y = = 2", []string{"syntax 2:11"}},
		{"syntax error before a malformed number", h0 + "local y = = 2\nlocal x = 1e", []string{"syntax 2:11"}},
		{"numbers Lua 5.1 reads", h0 + "return 1 + 1.5 + .5 + 5. + 1e3 + 1E-3 + 2.5e+2 + 1.e2 + 0xff + 0XA + 0x1F - 1 .. 2", nil},
		{"numerals in strings and comments", h0 + "local s = '1e' -- 1e\nreturn s .. [[1..2]] --[[ 0x ]]", nil},

		// shebang: the #! line is blanked, lines keep their numbers
		{"shebang syntax", "#!lua flags=no-writes\n" + h0 + "x = 1 y = = 2", []string{"syntax 3:11"}},
		{"shebang rules", "#!lua\n" + h0 + "\nx = 1", []string{"global-assign 4:1"}},
		{"shebang clean", "#!lua flags=no-writes\n" + h0 + "return redis.call('time')", nil},

		// global-assign
		{"global assign", h0 + "x = 1", []string{"global-assign 2:1"}},
		{"global assign in a function", h0 + "local function f() y = 2 end\nreturn f",
			[]string{"global-assign 2:20"}},
		{"global assign of many", h0 + "local a\na, b = 1, 2\nreturn a", []string{"global-assign 3:4"}},
		{"global function", h0 + "function f() end", []string{"global-assign 2:10"}},
		{"global table field function", h0 + "function a.b.c() end", []string{"global-assign 2:10"}},
		{"global method", h0 + "function a:m() return self end", []string{"global-assign 2:10"}},
		{"field of Redis global", h0 + "redis.x = 1\n_G.y = 2", []string{"global-assign 2:1", "global-assign 3:1"}},
		{"local assign", h0 + "local x\nx = 1\nreturn x", nil},
		{"local function statement", h0 + "local f\nfunction f() end\nreturn f", nil},
		{"local table field function", h0 + "local a = {}\nfunction a.b() end\nfunction a:c() return self end\nreturn a", nil},
		{"local table field", h0 + "local t = {}\nt.x, t[1] = 1, 2\nreturn t", nil},

		// undefined-global
		{"undefined global", h0 + "return foo", []string{"undefined-global 2:8"}},
		{"undefined global call", h0 + "return tostring(print('x'))", []string{"undefined-global 2:17"}},
		{"undefined global twice on a line", h0 + "return foo + foo", []string{"undefined-global 2:8", "undefined-global 2:14"}},
		{"undefined after its scope", h0 + "do local y = 1 end\nreturn y",
			[]string{"unused-local 2:10", "undefined-global 3:8"}},
		{"local x = x reads the outer x", h0 + "local x = x\nreturn x", []string{"undefined-global 2:11"}},
		{"allowed globals", h0 + "return tostring(1) .. type(cjson) .. bit.band(1, 2) .. string.rep('a', 2)" +
			" .. table.concat({}) .. math.floor(1) .. cmsgpack.pack(1) .. struct.pack('b', 1) .. _VERSION" +
			" .. select('#', 1) .. tostring(pcall(error)) .. tostring(_G) .. unpack({1})", nil},
		{"Redis 7.0 globals", h0 + "return tostring(coroutine.running()) .. collectgarbage('count') .. gcinfo() .. tostring(rawget(_G, 'x'))", nil},
		{"not in Redis 7.0", h0 + "return newproxy() .. os.clock() .. debug", []string{"undefined-global 2:8", "undefined-global 2:22", "undefined-global 2:36"}},
		{"names in strings and comments", h0 + "-- foo\nlocal s = 'foo' .. [[foo]] --[[ foo ]]\nreturn s", nil},
		{"field names are not globals", h0 + "local t = {foo = 1, bar = {baz = 2}}\nreturn t.foo + t.bar.baz", nil},

		// forbidden-call
		{"loadstring", h0 + "return loadstring('return 1')()", []string{"forbidden-call 2:8"}},
		{"require", h0 + "local m = require('m')\nreturn m", []string{"forbidden-call 2:11"}},
		{"setfenv and dofile", h0 + "setfenv(1, {})\ndofile('x')", []string{"forbidden-call 2:1", "forbidden-call 3:1"}},
		{"forbidden through _G", h0 + "return _G.getfenv", []string{"forbidden-call 2:8"}},
		{"forbidden name as a local", h0 + "local load = function() return 1 end\nreturn load()", nil},
		{"forbidden name as a field", h0 + "local t = {}\nt.load = 1\nreturn t.require", nil},

		// goto
		{"goto and label", h0 + "for i = 1, 3 do\n  if i == 2 then goto continue end\n  ::continue::\nend",
			[]string{"goto 3:18", "goto 4:3"}},
		{"goto in a word or a string", h0 + "local goto_x = '::x:: goto x'\nreturn goto_x", nil},
		{"break", h0 + "while true do break end", nil},

		// keys-range and argv-range
		{"keys beyond", h1 + "return redis.call('hget', KEYS[1], ARGV[1]) .. KEYS[2]", []string{"keys-range 4:48"}},
		{"keys zero and negative", h1 + "return KEYS[1] .. ARGV[1] .. KEYS[0] .. KEYS[-1]",
			[]string{"keys-range 4:30", "keys-range 4:41"}},
		{"argv beyond", h1 + "return KEYS[1] .. ARGV[1] .. ARGV[2]", []string{"argv-range 4:30"}},
		{"keys not whole", h1 + "return KEYS[1] .. ARGV[1] .. KEYS[1.5]", []string{"keys-range 4:30"}},
		{"keys and argv in range", h1 + "return KEYS[1] .. ARGV[1]", nil},
		{"non-literal index", h1 + "local i = 1\nreturn KEYS[i] .. ARGV[i + 1]", nil},
		{"variadic keys take any position", hv + "return KEYS[1] .. KEYS[7] .. ARGV[1] .. ARGV[2]", nil},
		{"variadic keys start at 1", hv + "return KEYS[1] .. KEYS[0] .. ARGV[1] .. ARGV[2]",
			[]string{"unused-key 2:9", "keys-range 6:19"}},
		{"no keys declared", h0 + "return KEYS[1]", []string{"keys-range 2:8"}},

		// unused-key and unused-arg
		{"unused key and arg", h1 + "return 1", []string{"unused-key 1:9", "unused-arg 2:9"}},
		{"length reads no entry", h1 + "return #KEYS + #ARGV", []string{"unused-key 1:9", "unused-arg 2:9"}},
		{"length beside a read", h1 + "if #KEYS ~= 1 then return 0 end\nreturn redis.call('get', KEYS[1]) .. ARGV[#ARGV]", nil},
		{"alias of KEYS is range-checked", h1 + "local k = KEYS\nreturn redis.call('get', k[1]) .. k[3] .. ARGV[1]", []string{"keys-range 5:35"}},
		{"used as values", h1 + "local k = KEYS\nlocal a = ARGV\nreturn {k, a}", nil},
		{"used by unpack and a loop index", h1 + "for i = 1, 1 do redis.call('get', KEYS[i]) end\nreturn unpack(ARGV)", nil},
		{"unused variadic key", hv + "return KEYS[1] .. ARGV[1] .. ARGV[2]", []string{"unused-key 2:9"}},
		{"variadic key used past its position", hv + "return KEYS[1] .. KEYS[3] .. ARGV[1] .. ARGV[2]", nil},
		{"second arg unused", hv + "return KEYS[1] .. KEYS[2] .. ARGV[1]", []string{"unused-arg 4:9"}},
		{"out of range does not use", h1 + "return KEYS[2] .. ARGV[1]", []string{"unused-key 1:9", "keys-range 4:8"}},

		// non-key-argument
		{"key from ARGV", h1 + "return redis.call('get', ARGV[1]) .. KEYS[1]", []string{"non-key-argument 4:26"}},
		{"key literal", h1 + "return redis.call('set', 'literal', ARGV[1]) .. KEYS[1]", []string{"non-key-argument 4:8"}},
		{"key concatenated", h1 + "local k = KEYS[1] .. ':x'\nreturn redis.call('get', k) .. ARGV[1]",
			[]string{"non-key-argument 5:26"}},
		{"nested call", h1 + "return tostring(redis.pcall('INCR', 'x' .. KEYS[1])) .. ARGV[1]",
			[]string{"non-key-argument 4:17"}},
		{"alias reassigned", h1 + "local k = KEYS[1]\nk = ARGV[1]\nreturn redis.call('get', k)",
			[]string{"non-key-argument 6:26"}},
		{"second key of mset", h1 + "return redis.call('mset', KEYS[1], ARGV[1], ARGV[1], 2)",
			[]string{"non-key-argument 4:45"}},
		{"rename target", h1 + "return redis.call('rename', KEYS[1], KEYS[1] .. ARGV[1])",
			[]string{"non-key-argument 4:38"}},
		{"alias chain", h1 + "local lock = KEYS[1]\nlocal k = lock\nreturn redis.call('hget', k, ARGV[1])", nil},
		{"alias assigned in branches", h1 + "local k\nif ARGV[1] == 'a' then k = KEYS[1] else k = KEYS[1] end\nreturn redis.call('get', k)", nil},
		{"loop over KEYS", h1 + "for _, k in ipairs(KEYS) do redis.call('del', k) end\nreturn ARGV[1]", nil},
		{"loop over an alias of KEYS", h1 + "local keys = KEYS\nfor _, k in pairs(keys) do redis.call('del', k, keys[1]) end\nreturn ARGV[1]", nil},
		{"keys in a table", h1 + "local ks = {KEYS[1], unpack(KEYS)}\nredis.call('del', unpack(ks))\nfor _, k in ipairs(ks) do redis.call('get', k) end\nreturn redis.call('get', ks[1]) .. ARGV[1]", nil},
		{"table of keys built in a loop", h1 + "local ks = {}\nfor _, k in ipairs(KEYS) do ks[#ks + 1] = k end\ntable.insert(ks, KEYS[1])\nreturn redis.call('del', unpack(ks)) .. ARGV[1]", nil},
		{"table with a non-key", h1 + "local ks = {KEYS[1], ARGV[1]}\nreturn redis.call('get', ks[1])", []string{"non-key-argument 5:26"}},
		{"table with named fields", h1 + "local ks = {lock = KEYS[1], [2] = KEYS[1]}\nreturn redis.call('get', ks.lock) .. redis.call('get', ks[2]) .. ARGV[1]", nil},
		{"entry of a table of keys cleared", h1 + "local ks = {KEYS[1]}\nks[#ks] = nil\nreturn redis.call('del', KEYS[1], unpack(ks)) .. ARGV[1]", nil},
		{"either table of keys", h1 + "local ks = ARGV[1] == 'x' and {KEYS[1]} or {}\nreturn redis.call('del', unpack(ks))", nil},
		{"table of keys read by a local function", h1 + "local function first(t) return t[1] end\nlocal function del(t) return redis.call('del', unpack(t)) end\nlocal ks = {KEYS[1]}\nreturn redis.call('get', first(ks)) .. del(ks) .. ARGV[1]", nil},
		{"alias of KEYS written", h1 + "local keys = KEYS\ntable.insert(keys, 'x:' .. ARGV[1])\nreturn redis.call('del', unpack(keys))", []string{"non-key-argument 6:26"}},
		{"table library through a local", h1 + "local tbl = table\nlocal ks = {KEYS[1]}\ntbl.insert(ks, ARGV[1])\nreturn redis.call('del', unpack(ks))", []string{"non-key-argument 7:26"}},
		{"insert function through a local", h1 + "local tinsert = table.insert\nlocal ks = {KEYS[1]}\ntinsert(ks, ARGV[1])\nreturn redis.call('del', unpack(ks))", []string{"non-key-argument 7:26"}},
		{"rawset into a table of keys", h1 + "local ks = {KEYS[1]}\nrawset(ks, 2, ARGV[1])\nreturn redis.call('del', unpack(ks))", []string{"non-key-argument 6:26"}},
		{"table of keys written by a helper", h1 + "local function add(t, k) t[#t + 1] = k end\nlocal ks = {KEYS[1]}\nadd(ks, ARGV[1])\nreturn redis.call('del', unpack(ks))", []string{"non-key-argument 7:26"}},
		{"table of keys aliased", h1 + "local ks = {KEYS[1]}\nlocal other = ks\nother[2] = ARGV[1]\nreturn redis.call('del', unpack(ks))", []string{"non-key-argument 7:26"}},
		{"table of keys with a metatable", h1 + "local ks = setmetatable({}, {__index = function(_, k) return k end})\nreturn redis.call('get', ks[ARGV[1]]) .. KEYS[1]", []string{"non-key-argument 5:26"}},
		{"non-key written into a table of keys", h1 + "local ks = {KEYS[1]}\nks[2] = ARGV[1]\nreturn redis.call('get', ks[1])", []string{"non-key-argument 6:26"}},
		{"non-key inserted into a table of keys", h1 + "local ks = {KEYS[1]}\nreturn redis.call('del', unpack(ks)) .. table.insert(ks, 1, 'x' .. ARGV[1])", []string{"non-key-argument 5:26"}},
		{"non-key written after the use", h1 + "local ks = {}\nlocal v = redis.call('get', ks[1])\nks[1] = ARGV[1]\nreturn v .. KEYS[1]", []string{"non-key-argument 5:29"}},
		{"unpack KEYS", h1 + "return redis.call('del', unpack(KEYS)) .. ARGV[1]", nil},
		{"command from a variable", h1 + "local cmd = 'get'\nreturn redis.call(cmd, ARGV[1]) .. KEYS[1]", []string{"non-key-argument 5:24"}},
		{"command from a variable, key in place", h1 + "local cmd = 'get'\nreturn redis.call(cmd, KEYS[1]) .. ARGV[1]", nil},
		{"same command assigned again in a loop", h1 + "local cmd = 'get'\nrepeat redis.call(cmd, ARGV[1]) cmd = 'get' until cmd == 'get'\nreturn KEYS[1]", []string{"non-key-argument 5:24"}},
		{"command through a parameter", h1 + "local function run(c) return redis.call(c, ARGV[1]) end\nreturn run('get') .. run('get') .. KEYS[1]", []string{"non-key-argument 4:44"}},
		{"command through an alias of a parameter", h1 + "local function run(c) local c2 = c return redis.call(c2, ARGV[1]) end\nreturn run('get') .. KEYS[1]", []string{"non-key-argument 4:58"}},
		{"command through two wrappers", h1 + "local function inner(c, k) return redis.call(c, k) end\nlocal function outer(c, k) return inner(c, k) end\nreturn outer('get', ARGV[1]) .. KEYS[1]", []string{"non-key-argument 4:49"}},
		{"inline command choice", h1 + "return redis.call(ARGV[1] == 'x' and 'publish' or 'del', KEYS[1], ARGV[1])", []string{"non-key-argument 4:67"}},
		// A local given several different commands is not checked: the walk
		// does not follow the order of assignments or pair a call's
		// arguments (from the review of this rule: these were false errors).
		{"command changed after use", h1 + "local cmd = 'get'\nlocal v = redis.call(cmd, KEYS[1])\ncmd = 'echo'\nreturn redis.call(cmd, ARGV[1]) .. v", nil},
		{"command changed in a loop", h1 + "local cmd = 'ping'\nrepeat redis.call(cmd, ARGV[1]) cmd = 'get' until cmd == 'get'\nreturn KEYS[1]", nil},
		{"wrapper called with different commands", h1 + "local function run(cmd, a) return redis.call(cmd, a) end\nrun('get', KEYS[1])\nreturn run('echo', ARGV[1])", nil},
		{"commands swapped", h1 + "local a, b = 'get', 'echo'\nredis.call(a, KEYS[1])\na, b = b, a\nreturn redis.call(a, ARGV[1]) .. b", nil},
		{"vararg wrapper", h1 + "local function run(cmd, ...) return redis.call(cmd, ...) end\nreturn run('get', KEYS[1]) .. ARGV[1]", nil},
		{"keys through ...", h1 + "local function del(...) return redis.call('del', KEYS[1], ...) end\nreturn del(KEYS[1]) .. ARGV[1]", nil},
		{"command parameter of an escaped function", h1 + "local function run(c) return redis.call(c, ARGV[1]) end\nreturn pcall(run, 'get') .. KEYS[1]", nil},
		{"command assigned after the function using it", h1 + "local cmd\nlocal function f() return redis.call(cmd, ARGV[1]) end\ncmd = 'get'\nreturn f() .. KEYS[1]", []string{"non-key-argument 5:43"}},
		{"command from ARGV", h1 + "local cmd = ARGV[1]\nreturn redis.call(cmd, 'x') .. KEYS[1]", nil},
		{"unknown command", h1 + "return redis.call('frobnicate', ARGV[1]) .. KEYS[1]", nil},
		{"command without keys", h1 + "return redis.call('publish', ARGV[1], KEYS[1])", nil},
		{"value arguments are not keys", h1 + "return redis.call('set', KEYS[1], ARGV[1], 'px', 100)", nil},
		// keys through the parameters of local functions
		{"key through a parameter", h1 + "local function get(k) return redis.call('get', k) end\nreturn get(KEYS[1]) .. ARGV[1]", nil},
		{"key through local f = function", h1 + "local get = function(k) return redis.call('get', k) end\nreturn get(KEYS[1]) .. ARGV[1]", nil},
		{"KEYS through a parameter", h1 + "local function first(keys) return redis.call('get', keys[1]) end\nreturn first(KEYS) .. ARGV[1]", nil},
		{"unpack KEYS into parameters", h1 + "local function mget(a, b) return redis.call('mget', a, b) end\nreturn mget(unpack(KEYS)) .. ARGV[1]", nil},
		{"parameter through an alias", h1 + "local function get(k) local key = k return redis.call('get', key) end\nlocal lock = KEYS[1]\nreturn get(lock) .. ARGV[1]", nil},
		{"recursive call with a key", h1 + "local function del(k, n) if n > 0 then del(k, n - 1) end return redis.call('del', k) end\nreturn del(KEYS[1], tonumber(ARGV[1]))", nil},
		{"one call passes a non-key", h1 + "local function get(k) return redis.call('get', k) end\nreturn get(KEYS[1]) .. get(ARGV[1])",
			[]string{"non-key-argument 4:48"}},
		{"a later call passes a non-key", h1 + "local function get(k) return redis.call('get', k) end\nlocal v = get(KEYS[1])\nreturn v .. get('x' .. ARGV[1])",
			[]string{"non-key-argument 4:48"}},
		{"recursive call with a non-key", h1 + "local function del(k, n) if n > 0 then del(ARGV[1], n - 1) end return redis.call('del', k) end\nreturn del(KEYS[1], 1)",
			[]string{"non-key-argument 4:89"}},
		{"missing argument", h1 + "local function get(k) return redis.call('get', k) end\nreturn get() .. get(KEYS[1]) .. ARGV[1]",
			[]string{"non-key-argument 4:48"}},
		{"function passed as a value", h1 + "local function get(k) return redis.call('get', k) end\nreturn select(2, pcall(get, KEYS[1])) .. ARGV[1]",
			[]string{"non-key-argument 4:48"}},
		{"function aliased after its calls", h1 + "local function get(k) return redis.call('get', k) end\nlocal v = get(KEYS[1])\nlocal g = get\nreturn v .. g(KEYS[1]) .. ARGV[1]",
			[]string{"non-key-argument 4:48"}},
		{"function assigned again", h1 + "local function get(k) return redis.call('get', k) end\nlocal v = get(KEYS[1])\nget = function(k) return k end\nreturn v .. get(ARGV[1])",
			[]string{"non-key-argument 4:48"}},
		{"function in a table field", h1 + "local t = {}\nfunction t.get(k) return redis.call('get', k) end\nreturn t.get(KEYS[1]) .. ARGV[1]",
			[]string{"non-key-argument 5:44"}},
		{"anonymous function", h1 + "return (function(k) return redis.call('get', k) end)(KEYS[1]) .. ARGV[1]",
			[]string{"non-key-argument 4:46"}},

		// shadowed-local
		{"shadow in a block", h0 + "local x = 1\ndo\n  local x = 2\n  redis.log(redis.LOG_NOTICE, x)\nend\nreturn x",
			[]string{"shadowed-local 4:9"}},
		{"redeclare in a scope", h0 + "local x = 1\nlocal x = x + 1\nreturn x", []string{"shadowed-local 3:7"}},
		{"shadowing parameter", h0 + "local x = 1\nlocal function f(y, x) return x + y end\nreturn f(x, x)",
			[]string{"shadowed-local 3:21"}},
		{"shadowing loop variable", h0 + "local i = 0\nfor i = 1, 2 do redis.log(redis.LOG_NOTICE, i) end\nreturn i",
			[]string{"shadowed-local 3:5"}},
		{"shadowing local function", h0 + "local f = 1\ndo\n  local function f() return 1 end\n  f()\nend\nreturn f",
			[]string{"shadowed-local 4:18"}},
		{"body local shadows a loop variable", h0 + "for _, v in ipairs(ARGV) do local v = v .. 'x' redis.log(0, v) end",
			[]string{"shadowed-local 2:35"}},
		{"underscore is never shadowed", h0 + "for _, a in ipairs(ARGV) do for _, b in ipairs(a) do redis.log(0, b) end end", nil},
		{"sibling scopes", h0 + "do local a = 1 redis.log(0, a) end\ndo local a = 2 redis.log(0, a) end", nil},

		// unused-local
		{"unused local", h0 + "local x = 1", []string{"unused-local 2:7"}},
		{"written, never read", h0 + "local x = 1\nx = 2", []string{"unused-local 2:7"}},
		{"unused local function", h0 + "local function helper() end", []string{"unused-local 2:16"}},
		{"unused loop variable", h0 + "for i = 1, 3 do end", []string{"unused-local 2:5"}},
		{"unused second of two", h0 + "local a, b = 1, 2\nreturn a", []string{"unused-local 2:10"}},
		{"underscore names", h0 + "local _ = 1\nlocal _unused = 2\nfor _i = 1, 2 do end", nil},
		{"unused parameters", h0 + "local function f(a, b) return a end\nreturn f(1)", nil},
		{"read by a closure", h0 + "local x = 1\nreturn function() return x end", nil},

		// scopes
		{"local function sees itself", h0 + "local function f(n) if n > 0 then return f(n - 1) end return n end\nreturn f(3)", nil},
		{"local f = function does not", h0 + "local f = function(n) return f(n) end\nreturn f(1)",
			[]string{"undefined-global 2:30"}},
		{"loop variable out of scope", h0 + "for i = 1, 2 do end\nreturn i",
			[]string{"unused-local 2:5", "undefined-global 3:8"}},
		{"until sees the body", h0 + "local n = 0\nrepeat local done = n > 3 n = n + 1 until done\nreturn done",
			[]string{"undefined-global 4:8"}},
		{"method self", h0 + "local t = {}\nfunction t:get() return self end\nreturn t", nil},
		{"vararg", h0 + "local function f(...) return select('#', ...) end\nreturn f(...)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := brief(lintSource(t, tt.src))
			want := tt.want
			if want == nil {
				want = []string{}
			}
			if !slices.Equal(got, want) {
				t.Errorf("findings\n got %q\nwant %q\nsource:\n%s", got, want, tt.src)
			}
		})
	}
}

func TestLintASTMessages(t *testing.T) {
	tests := []struct {
		name, src string
		want      Diagnostic
	}{
		{"keys-range", h1 + "return KEYS[1] .. ARGV[1] ..\n  KEYS[3]", Diagnostic{
			Line: 5, Col: 3, Rule: RuleKeysRange,
			Message: "KEYS[3] is beyond the 1 key the header declares (@key): declare another @key or fix the index"}},
		{"argv-range", h1 + "return KEYS[1] .. ARGV[1] .. ARGV[0]", Diagnostic{
			Line: 4, Col: 30, Rule: RuleArgvRange,
			Message: "ARGV[0] is before the first arg: ARGV counts from 1"}},
		{"unused-key", h1 + "return ARGV[1]", Diagnostic{
			Line: 1, Col: 9, Rule: RuleUnusedKey,
			Message: "@key lock is never used: read it as KEYS[1], or remove it from the header"}},
		{"non-key-argument", h1 + "local field = ARGV[1]\nreturn KEYS[1] .. redis.call('get',\n  field)", Diagnostic{
			Line: 6, Col: 3, Rule: RuleNonKeyArgument,
			Message: "redis.call('get', ...): the key is not taken from KEYS; Redis Cluster needs every key declared: pass it in KEYS and declare it with @key"}},
		{"global-assign", h0 + "  count = 1", Diagnostic{
			Line: 2, Col: 3, Rule: RuleGlobalAssign,
			Message: "assignment to global count: Redis forbids globals; declare it with local"}},
		{"forbidden-call", h0 + "return pcall(dofile, 'x')", Diagnostic{
			Line: 2, Col: 14, Rule: RuleForbiddenCall,
			Message: "Redis does not provide dofile: a script cannot read files; put the code in the script"}},
		{"unused-local", h0 + "local a,\n  b = 1, 2\nreturn a", Diagnostic{
			Line: 3, Col: 3, Rule: RuleUnusedLocal, Severity: Warning,
			Message: "local b is never read: remove it, or name it _ if a value must be skipped"}},
		{"shadowed-local", h0 + "local n = 1\nlocal function f(\n    n)\n  return n\nend\nreturn f(n)", Diagnostic{
			Line: 4, Col: 5, Rule: RuleShadowedLocal, Severity: Warning,
			Message: "parameter n shadows the local n of line 2: use another name"}},
		{"column after a long string", h0 + "local s = [[\nx = 1 ]] x = 2\nreturn s", Diagnostic{
			Line: 3, Col: 10, Rule: RuleGlobalAssign,
			Message: "assignment to global x: Redis forbids globals; declare it with local"}},
		{"syntax", h0 + "local x = 1\nreturn x end", Diagnostic{
			Line: 3, Col: 10, Rule: RuleSyntax, Message: "syntax error near 'end'"}},
		{"malformed number", h0 + "local x = 1\nreturn x + 2e", Diagnostic{
			Line: 3, Col: 12, Rule: RuleSyntax, Message: "malformed number near '2e'"}},
		{"non-key-argument through a parameter", h1 + "local function get(k) return redis.call('get', k) end\nreturn get(ARGV[1]) .. KEYS[1]", Diagnostic{
			Line: 4, Col: 48, Rule: RuleNonKeyArgument,
			Message: "redis.call('get', ...): the key (parameter k: a parameter is a key only when its local function is only ever called, by name, with a KEYS entry in its place) is not taken from KEYS; Redis Cluster needs every key declared: pass it in KEYS and declare it with @key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := lintSource(t, tt.src)
			if len(ds) != 1 {
				t.Fatalf("want one finding, got %v", ds)
			}
			want := tt.want
			want.File = "lua/t.lua"
			if ds[0] != want {
				t.Errorf("got  %#v\nwant %#v", ds[0], want)
			}
		})
	}
}

func TestLintIgnore(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{"silence one rule", "x = 1 -- luagen:ignore global-assign", []string{}},
		{"silence a listed rule", "x = foo -- luagen:ignore undefined-global, global-assign", []string{}},
		{"other rule kept", "x = 1 -- luagen:ignore unused-local", []string{"global-assign 2:1"}},
		{"silence all", "x = foo -- luagen:ignore", []string{}},
		{"only its line", "x = 1 -- luagen:ignore\ny = 2", []string{"global-assign 3:1"}},
		{"warnings too", "local unused = 1 -- luagen:ignore unused-local", []string{}},
		{"syntax is never silenced", "x = = 1 -- luagen:ignore", []string{"syntax 2:5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"lua/t.lua": {Data: []byte(h0 + tt.body + "\n")}}
			got := brief(Lint(fsys, Config{Src: "lua"}))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRulesAndGlobals(t *testing.T) {
	if !slices.IsSorted(Globals) {
		t.Errorf("Globals is not sorted: %q", Globals)
	}
	for _, g := range []string{"redis", "KEYS", "ARGV", "cjson", "unpack", "_G"} {
		if !slices.Contains(Globals, g) {
			t.Errorf("Globals lacks %s", g)
		}
	}
	for name := range forbidden {
		if slices.Contains(Globals, name) {
			t.Errorf("%s is both allowed and forbidden", name)
		}
	}
	kebab := regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)
	seen := map[string]bool{}
	for _, r := range Rules {
		if !kebab.MatchString(r.Name) || seen[r.Name] || r.Doc == "" {
			t.Errorf("bad rule %+v", r)
		}
		seen[r.Name] = true
	}
	for _, name := range []string{RuleSyntax, RuleGlobalAssign, RuleUndefinedGlobal, RuleForbiddenCall, RuleGoto,
		RuleKeysRange, RuleArgvRange, RuleUnusedKey, RuleUnusedArg, RuleNonKeyArgument, RuleShadowedLocal, RuleUnusedLocal} {
		if !seen[name] {
			t.Errorf("Rules lacks %s", name)
		}
	}
	for name, c := range Commands {
		if name != strings.ToLower(name) || c.Name != name {
			t.Errorf("Commands: %s (%s) is not lower case, or not its name", name, c.Name)
		}
	}
}

func TestLuaNumeral(t *testing.T) {
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"1", true}, {"1.5", true}, {".5", true}, {"5.", true}, {"1e5", true}, {"1E-5", true},
		{"1.e5", true}, {"2.5e+2", true}, {"0xff", true}, {"0XA", true}, {"0x.8", true}, {"0x1p4", true},
		{"1e", false}, {"1e+", false}, {"1..2", false}, {"1.2.3", false}, {"12abc", false},
		{"0x", false}, {"0xfg", false}, {"1e5x", false}, {"0x1p", false}, {"1x5", false},
	} {
		if got := luaNumeral(tt.text); got != tt.want {
			t.Errorf("luaNumeral(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

// TestKeySpecPositions: key positions from Redis's key specs
// (commands.json), literal arguments given as text, "?" for one that is
// not a literal.
func TestKeySpecPositions(t *testing.T) {
	tests := []struct {
		args     string
		want     []int
		complete bool
	}{
		{"get k", []int{1}, true},
		{"set k v EX 10", []int{1}, true},
		{"del a b c", []int{1, 2, 3}, true},
		{"mset a 1 b 2", []int{1, 3}, true},
		{"blpop a b 0", []int{1, 2}, true},
		{"rename a b", []int{1, 2}, true},
		{"object encoding k", []int{2}, true},
		{"memory usage k", []int{2}, true},
		{"memory usage k SAMPLES 5", []int{2}, true},
		{"time", nil, true},
		{"bitop AND d a b", []int{2, 3, 4}, true},
		{"eval s 2 a b x", []int{3, 4}, true},
		{"eval s ? a b x", nil, false},
		{"zunionstore d 2 a b WEIGHTS 1 2", []int{1, 3, 4}, true},
		{"xread COUNT 1 STREAMS s1 s2 0 0", []int{4, 5}, true},
		// Redis 7.0 describes SORT's STORE key as unknown.
		{"sort k STORE d", []int{1}, false},
		{"lmpop 2 a b LEFT", []int{2, 3}, true},
		{"migrate h p k 0 10 KEYS a b", []int{3, 7, 8}, true},
		{"georadius k 0 0 1 m STORE d", []int{1, 7}, true},
	}
	for _, tt := range tests {
		f := strings.Fields(tt.args)
		sub := ""
		if len(f) > 1 {
			sub = f[1]
		}
		c, ok := lookupCommand(f[0], sub, true)
		if !ok {
			t.Errorf("Commands lacks %s", f[0])
			continue
		}
		lit := func(i int) (string, bool) {
			if i < 1 || i >= len(f) || f[i] == "?" {
				return "", false
			}
			return f[i], true
		}
		got, complete := c.keyPositions(len(f)-1, lit)
		if !slices.Equal(got, tt.want) || complete != tt.complete {
			t.Errorf("%s: keys %v (complete %v), want %v (%v)", tt.args, got, complete, tt.want, tt.complete)
		}
	}
}

// FuzzLintAST checks that no source makes the linter panic or report a
// position outside the file.
func FuzzLintAST(f *testing.F) {
	entries, _ := os.ReadDir("../../../lua") // the repository's scripts, when there
	for _, e := range entries {
		if src, err := os.ReadFile("../../../lua/" + e.Name()); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte(h1 + "local k = KEYS[1]\nfor _, v in ipairs(KEYS) do redis.call('del', v, k) end\ngoto x ::x::"))
	f.Add([]byte(h1 + "local c = ARGV[1] and 'get' or 'del'\nlocal function run(x, k) return redis.call(x, k) end\nrun(c, KEYS[1])\nrepeat c = 'exists' until run('incr', ARGV[1])"))
	f.Fuzz(func(t *testing.T, src []byte) {
		s, _ := parseScript("lua/f.lua", src)
		if s == nil {
			return
		}
		lines := strings.Count(string(luaLines(src)), "\n") + 1 // as Lua counts them
		for _, d := range lintAST(s, Config{}) {
			if d.Line < 1 || d.Line > lines || d.Col < 1 {
				t.Errorf("bad position %v in a file of %d lines", d, lines)
			}
		}
	})
}

// TestLineBreaksAsLua checks that findings are placed on the lines Lua
// counts: "\r\n", "\n\r", a lone "\r" and "\n" each end one line, as they
// do for Redis's Lua and gopher-lua's parser.
func TestLineBreaksAsLua(t *testing.T) {
	for _, br := range []string{"\n", "\r\n", "\n\r", "\r"} {
		src := "-- @return nil" + br + "local x = 1" + br + br + "return x .. y"
		s, _ := parseScript("lua/t.lua", []byte(src))
		if s == nil {
			t.Fatalf("break %q: no script", br)
		}
		got := brief(lintAST(s, Config{}))
		if want := []string{"undefined-global 4:13"}; !slices.Equal(got, want) {
			t.Errorf("break %q: findings %v, want %v", br, got, want)
		}
		if line, col := offsetPosition([]byte(src), strings.Index(src, "y")); line != 4 || col != 13 {
			t.Errorf("break %q: offsetPosition gives %d:%d, want 4:13", br, line, col)
		}
	}
	if got := string(luaLines([]byte("a\r\nb\n\rc\rd\ne\r\r\n"))); got != "a\nb\nc\nd\ne\n\n" {
		t.Errorf("luaLines: %q", got)
	}
}

// TestShebangEndsAtLF checks that a shebang runs to the first "\n", as in
// Redis: a lone CR inside it does not end it (Redis would read what follows
// as shebang options), and the script's lines are counted from that "\n".
func TestShebangEndsAtLF(t *testing.T) {
	s, ds := parseScript("lua/t.lua", []byte("#!lua\r-- @key lock the lock\n-- @return any\nreturn redis.call('get', KEYS[1])\n"))
	if s == nil || !slices.ContainsFunc(ds, func(d Diagnostic) bool { return d.Rule == RuleShebang && d.Line == 1 }) {
		t.Errorf("shebang with a lone CR: findings %v, want a shebang finding on line 1", ds)
	}
	s, ds = parseScript("lua/t.lua", []byte("#!lua\n\r-- @key lock the lock\n-- @return any\nreturn redis.call('get', KEYS[1]) .. x\n"))
	if s == nil || len(ds) != 1 || ds[0].Rule != RuleCRLF || ds[0].Line != 1 {
		t.Fatalf("shebang ended by \\n\\r: findings %v, want only the crlf warning on line 1", ds)
	}
	if got, want := brief(lintAST(s, Config{})), []string{"undefined-global 4:38"}; !slices.Equal(got, want) {
		t.Errorf("shebang ended by \\n\\r: findings %v, want %v", got, want)
	}
}
