package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lualock/lualock/cmd/luagen/internal/redistest"
)

var updateCommands = flag.Bool("update-commands", false, "rewrite commands.json from the COMMAND INFO and COMMAND DOCS of the redis-server on PATH")

// TestCommandTable makes the command table from a running redis-server's
// COMMAND INFO and COMMAND DOCS and compares it with commands.json, when
// that server is the version the file was made from; -update-commands
// rewrites the file from whatever version is on PATH.
func TestCommandTable(t *testing.T) {
	c := redistest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	version := redisVersion(t, c)
	info, err := c.Do(ctx, "command", "info").Slice()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := c.Do(ctx, "command", "docs").Result()
	if err != nil {
		t.Fatal(err)
	}
	table, err := buildCommandTable(version, info, docs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(table, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *updateCommands {
		if err := os.WriteFile("commands.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("commands.json: %d commands of Redis %s", len(table.Commands), version)
		return
	}
	var have CommandTable
	if err := json.Unmarshal(commandsJSON, &have); err != nil {
		t.Fatal(err)
	}
	if have.Redis != version {
		t.Skipf("commands.json was made from Redis %s, this is %s: -update-commands to remake it", have.Redis, version)
	}
	if !bytes.Equal(got, commandsJSON) {
		t.Errorf("commands.json differs from the metadata of Redis %s: go test ./gen -run TestCommandTable -update-commands", version)
	}
}

// buildCommandTable reduces COMMAND INFO and COMMAND DOCS replies (RESP2
// or RESP3) to a CommandTable.
func buildCommandTable(version string, info []any, docs any) (*CommandTable, error) {
	t := &CommandTable{
		Source: "COMMAND INFO and COMMAND DOCS of redis-server " + version + ", reduced by TestCommandTable (go test ./gen -run TestCommandTable -update-commands)",
		Redis:  version,
	}
	docMap, err := pairs(docs)
	if err != nil {
		return nil, fmt.Errorf("COMMAND DOCS: %w", err)
	}
	var add func(raw any, doc map[string]any) error
	add = func(raw any, doc map[string]any) error {
		a, ok := raw.([]any)
		if !ok || len(a) < 10 {
			return fmt.Errorf("COMMAND INFO entry %v", raw)
		}
		name, _ := a[0].(string)
		cmd := &Command{Name: strings.ToLower(name)}
		for _, f := range asSlice(a[2]) {
			if s, ok := f.(string); ok {
				cmd.Flags = append(cmd.Flags, s)
			}
		}
		for _, raw := range asSlice(a[8]) {
			ks, notKey, err := keySpecOf(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if !notKey { // SPUBLISH's shard channel: routed as a key, not one
				cmd.Keys = append(cmd.Keys, ks)
			}
		}
		if doc != nil {
			cmd.Since, _ = doc["since"].(string)
			cmd.Options = map[string]string{}
			collectOptions(asSlice(doc["arguments"]), "", cmd.Since, cmd.Options)
			if len(cmd.Options) == 0 {
				cmd.Options = nil
			}
		}
		t.Commands = append(t.Commands, cmd)
		subs := asSlice(a[9])
		cmd.Subcommands = len(subs) > 0
		var subDocs map[string]any
		if doc != nil {
			subDocs, _ = pairs(doc["subcommands"])
		}
		for _, s := range subs {
			sa := asSlice(s)
			if len(sa) == 0 {
				continue
			}
			sname, _ := sa[0].(string)
			sd, _ := pairs(subDocs[sname])
			if err := add(s, sd); err != nil {
				return err
			}
		}
		return nil
	}
	for _, raw := range info {
		name, _ := asSlice(raw)[0].(string)
		d, _ := pairs(docMap[name])
		if err := add(raw, d); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(t.Commands, func(a, b *Command) int { return strings.Compare(a.Name, b.Name) })
	return t, nil
}

// collectOptions records the tokens of args newer than since (an
// argument's own since, or its block's).
func collectOptions(args []any, inherited, since string, out map[string]string) {
	for _, raw := range args {
		a, err := pairs(raw)
		if err != nil {
			continue
		}
		s, _ := a["since"].(string)
		if s == "" {
			s = inherited
		}
		if tok, _ := a["token"].(string); tok != "" && s != "" && newer(s, since) {
			out[strings.ToUpper(tok)] = s
		}
		collectOptions(asSlice(a["arguments"]), s, since, out)
	}
}

// newer reports whether version a is newer than b ("" is oldest).
func newer(a, b string) bool {
	va, err := ParseRedisVersion(a)
	if err != nil {
		return false
	}
	vb, err := ParseRedisVersion(b)
	if err != nil {
		return true
	}
	return vb.Less(va)
}

// keySpecOf reads one key spec of COMMAND INFO, and whether Redis flags
// it NOT_KEY.
func keySpecOf(raw any) (ks KeySpec, notKey bool, err error) {
	m, err := pairs(raw)
	if err != nil {
		return ks, false, err
	}
	for _, f := range asSlice(m["flags"]) {
		if f == "not_key" || f == "NOT_KEY" {
			notKey = true
		}
	}
	bs, _ := pairs(m["begin_search"])
	bspec, _ := pairs(bs["spec"])
	switch bs["type"] {
	case "index":
		ks.BeginIndex = asInt(bspec["index"])
	case "keyword":
		ks.Keyword, _ = bspec["keyword"].(string)
		ks.StartFrom = asInt(bspec["startfrom"])
	default:
		ks.Unknown = true
		return ks, notKey, nil
	}
	fk, _ := pairs(m["find_keys"])
	fspec, _ := pairs(fk["spec"])
	switch fk["type"] {
	case "range":
		ks.LastKey, ks.KeyStep, ks.Limit = asInt(fspec["lastkey"]), asInt(fspec["keystep"]), asInt(fspec["limit"])
	case "keynum":
		ks.KeyNum = true
		ks.KeyNumIdx, ks.FirstKey, ks.KeyStep = asInt(fspec["keynumidx"]), asInt(fspec["firstkey"]), asInt(fspec["keystep"])
	default:
		ks.Unknown = true
	}
	return ks, notKey, nil
}

// pairs reads a map: RESP3's, or RESP2's flat array of names and values.
func pairs(v any) (map[string]any, error) {
	if m, ok := v.(map[any]any); ok {
		out := make(map[string]any, len(m))
		for k, x := range m {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("map key %v", k)
			}
			out[ks] = x
		}
		return out, nil
	}
	a := asSlice(v)
	if len(a)%2 != 0 {
		return nil, fmt.Errorf("odd map of %d elements", len(a))
	}
	m := make(map[string]any, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		k, ok := a[i].(string)
		if !ok {
			return nil, fmt.Errorf("map key %v", a[i])
		}
		m[k] = a[i+1]
	}
	return m, nil
}

func asSlice(v any) []any {
	a, _ := v.([]any)
	return a
}

func asInt(v any) int {
	n, _ := v.(int64)
	return int(n)
}
