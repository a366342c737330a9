package gen

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// RuleReadOnlyWrite: a write command called by a script that declares it
// does not write (@flag read-only, a #!lua flags=no-writes shebang, or a
// Redis Function registered with the no-writes flag). Redis refuses the
// call at run time: "Write commands are not allowed from read-only
// scripts". Commands flagged may-replicate (PUBLISH, SPUBLISH, PFCOUNT)
// are refused too.
const RuleReadOnlyWrite = "read-only-write"

// commandsJSON is Redis's own metadata of its commands: COMMAND INFO and
// COMMAND DOCS of the redis-server named in it, reduced to what the lint
// needs. TestCommandTable compares it with a running redis-server of the
// same version and rewrites it with -update-commands:
//
//	go test ./gen -run TestCommandTable -update-commands
//
//go:generate go test -run ^TestCommandTable$ -update-commands
//go:embed commands.json
var commandsJSON []byte

// CommandTable is the content of commands.json.
type CommandTable struct {
	// Source says how the file was made; Redis is the version of the
	// redis-server it was made from.
	Source string `json:"source"`
	Redis  string `json:"redis"`
	// Commands are Redis's commands and subcommands, sorted by name.
	Commands []*Command `json:"commands"`
}

// Command is one Redis command, or one subcommand of a container command
// ("memory|usage"), as COMMAND INFO and COMMAND DOCS describe it.
type Command struct {
	// Name is the command in lower case; a subcommand is "container|sub".
	Name string `json:"name"`
	// Since is the Redis version that introduced the command.
	Since string `json:"since"`
	// Flags are COMMAND INFO's flags (write, readonly, may_replicate, ...).
	Flags []string `json:"flags,omitempty"`
	// Keys are the command's key specs: where its keys are.
	Keys []KeySpec `json:"keys,omitempty"`
	// Options maps the tokens of the command's arguments (BYSCORE,
	// LIMIT), in upper case, to the Redis version that added them, for
	// those newer than the command.
	Options map[string]string `json:"options,omitempty"`
	// Subcommands reports that the command is a container (MEMORY,
	// OBJECT, XGROUP): its second argument names the subcommand.
	Subcommands bool `json:"subcommands,omitempty"`
}

// KeySpec is one key spec of a command, as Redis 7 describes it: where
// the search for keys begins (an argument index, or the argument after a
// keyword), and how keys are found from there (a range, or a count of
// keys read from an argument). Indexes count the command name as 0.
type KeySpec struct {
	// BeginIndex is the index of the first argument searched, when the
	// search begins at an index.
	BeginIndex int `json:"index,omitempty"`
	// Keyword and StartFrom: the search begins after the argument equal
	// to Keyword (any case), looked for from index StartFrom (counting
	// from the end when negative).
	Keyword   string `json:"keyword,omitempty"`
	StartFrom int    `json:"startfrom,omitempty"`
	// LastKey, KeyStep and Limit describe a range of keys: the last key
	// is LastKey arguments after the first (negative: counted from the
	// end of the arguments, -1 being the last), every KeyStep-th argument
	// is a key, and when LastKey is -1 and Limit is above 1, only the
	// first 1/Limit of the remaining arguments are searched.
	LastKey int `json:"lastkey,omitempty"`
	KeyStep int `json:"keystep,omitempty"`
	Limit   int `json:"limit,omitempty"`
	// KeyNum, KeyNumIdx and FirstKey describe a counted run of keys: the
	// argument KeyNumIdx after the beginning holds the count, the first
	// key is FirstKey after the beginning, every KeyStep-th is a key.
	KeyNum    bool `json:"keynum,omitempty"`
	KeyNumIdx int  `json:"keynumidx,omitempty"`
	FirstKey  int  `json:"firstkey,omitempty"`
	// Unknown marks a spec Redis cannot describe (keys found only by
	// reading the arguments in the command's own way).
	Unknown bool `json:"unknown,omitempty"`
}

// Commands maps a command name in lower case ("get", "memory|usage") to
// its metadata: commands.json, plus the commands newer than the Redis it
// was made from (newerCommands).
var Commands = loadCommands()

// newerCommands are commands newer than the redis-server commands.json
// was made from, with their key specs and versions, kept by hand.
var newerCommands = []*Command{
	{Name: "hexpire", Since: "7.4.0", Flags: []string{"write"}, Keys: []KeySpec{oneKey}},
	{Name: "hexpireat", Since: "7.4.0", Flags: []string{"write"}, Keys: []KeySpec{oneKey}},
	{Name: "hexpiretime", Since: "7.4.0", Keys: []KeySpec{oneKey}},
	{Name: "hpersist", Since: "7.4.0", Flags: []string{"write"}, Keys: []KeySpec{oneKey}},
	{Name: "hpexpire", Since: "7.4.0", Flags: []string{"write"}, Keys: []KeySpec{oneKey}},
	{Name: "hpexpireat", Since: "7.4.0", Flags: []string{"write"}, Keys: []KeySpec{oneKey}},
	{Name: "hpexpiretime", Since: "7.4.0", Keys: []KeySpec{oneKey}},
	{Name: "hpttl", Since: "7.4.0", Keys: []KeySpec{oneKey}},
	{Name: "httl", Since: "7.4.0", Keys: []KeySpec{oneKey}},
	{Name: "hgetdel", Since: "8.0.0", Flags: []string{"write"}, Keys: []KeySpec{oneKey}},
	{Name: "hgetex", Since: "8.0.0", Flags: []string{"write"}, Keys: []KeySpec{oneKey}},
	{Name: "hsetex", Since: "8.0.0", Flags: []string{"write"}, Keys: []KeySpec{oneKey}},
}

var oneKey = KeySpec{BeginIndex: 1, KeyStep: 1}

func loadCommands() map[string]*Command {
	var t CommandTable
	if err := json.Unmarshal(commandsJSON, &t); err != nil {
		panic("gen: commands.json: " + err.Error())
	}
	m := make(map[string]*Command, len(t.Commands)+len(newerCommands))
	for _, c := range append(t.Commands, newerCommands...) {
		m[c.Name] = c
	}
	return m
}

// writes reports whether Redis refuses the command in a read-only
// script: it is flagged write, or Redis flags it may-replicate, which
// COMMAND INFO does not show (mayReplicate).
func (c *Command) writes() bool {
	return slices.Contains(c.Flags, "write") || mayReplicate[c.Name]
}

// mayReplicate are the commands a script may call that Redis 7 flags
// may-replicate (CMD_MAY_REPLICATE, not part of COMMAND INFO's flags), and
// refuses in read-only scripts.
var mayReplicate = map[string]bool{"publish": true, "spublish": true, "pfcount": true}

// manyKeys reports whether the command may take more than one key.
func (c *Command) manyKeys() bool {
	if len(c.Keys) > 1 {
		return true
	}
	for _, k := range c.Keys {
		if k.LastKey != 0 || k.KeyNum || k.Keyword != "" || k.Unknown {
			return true
		}
	}
	return false
}

// lookupCommand returns the command of a call whose command name is name
// and whose next argument, when a literal, is sub: the subcommand's entry
// for a container command when sub names one.
func lookupCommand(name string, sub string, subKnown bool) (*Command, bool) {
	c, ok := Commands[strings.ToLower(name)]
	if !ok {
		return nil, false
	}
	if c.Subcommands && subKnown {
		if s, ok := Commands[c.Name+"|"+strings.ToLower(sub)]; ok {
			return s, true
		}
	}
	return c, true
}

// keyPositions lists the indexes of the keys of a call whose arguments,
// the command name at index 0, are args (len(args)-1 arguments after the
// name); lit returns the literal text of argument i when it is one.
// complete is false when some keys cannot be placed (a keyword or a count
// that is not a literal, an unknown spec): the positions listed are still
// keys.
func (c *Command) keyPositions(nargs int, lit func(i int) (string, bool)) (positions []int, complete bool) {
	complete = true
	seen := map[int]bool{}
	for _, ks := range c.Keys {
		ps, ok := ks.positions(nargs, lit)
		complete = complete && ok
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				positions = append(positions, p)
			}
		}
	}
	slices.Sort(positions)
	return positions, complete
}

// positions lists the key indexes of one spec in a call with nargs
// arguments after the command name.
func (k KeySpec) positions(nargs int, lit func(i int) (string, bool)) ([]int, bool) {
	if k.Unknown {
		return nil, false
	}
	begin := k.BeginIndex
	if k.Keyword != "" {
		found := false
		if k.StartFrom >= 0 {
			for i := max(k.StartFrom, 1); i <= nargs; i++ {
				if s, ok := lit(i); ok && strings.EqualFold(s, k.Keyword) {
					begin, found = i+1, true
					break
				}
			}
		} else {
			for i := nargs + 1 + k.StartFrom; i >= 1; i-- {
				if s, ok := lit(i); ok && strings.EqualFold(s, k.Keyword) {
					begin, found = i+1, true
					break
				}
			}
		}
		if !found {
			// An optional keyword (SORT ... STORE) that is absent has no
			// keys; one that is not a literal cannot be placed.
			return nil, allLiteral(nargs, lit)
		}
	}
	if begin < 1 || begin > nargs {
		return nil, true
	}
	step := max(k.KeyStep, 1)
	var first, last int
	if k.KeyNum {
		s, ok := lit(begin + k.KeyNumIdx)
		n, err := strconv.Atoi(s)
		if !ok || err != nil || n < 0 {
			return nil, false
		}
		first = begin + k.FirstKey
		last = first + (n-1)*step
	} else {
		first = begin
		switch {
		case k.LastKey >= 0:
			last = begin + k.LastKey
		case k.LastKey == -1 && k.Limit > 1:
			last = begin + (nargs-begin+1)/k.Limit - 1
		default:
			last = nargs + 1 + k.LastKey
		}
	}
	var out []int
	for p := first; p <= last && p <= nargs; p += step {
		out = append(out, p)
	}
	return out, true
}

// allLiteral reports whether every argument of a call is a literal.
func allLiteral(nargs int, lit func(int) (string, bool)) bool {
	for i := 1; i <= nargs; i++ {
		if _, ok := lit(i); !ok {
			return false
		}
	}
	return true
}

// RedisVersion is a Redis version, major.minor[.patch].
type RedisVersion [3]int

// ParseRedisVersion reads "6.2" or "7.0.15".
func ParseRedisVersion(s string) (RedisVersion, error) {
	var v RedisVersion
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("redis version %q: want MAJOR.MINOR or MAJOR.MINOR.PATCH", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("redis version %q: %q is not a number", s, p)
		}
		v[i] = n
	}
	return v, nil
}

// Less reports whether v is older than w.
func (v RedisVersion) Less(w RedisVersion) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

func (v RedisVersion) String() string {
	if v[2] == 0 {
		return fmt.Sprintf("%d.%d", v[0], v[1])
	}
	return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
}
