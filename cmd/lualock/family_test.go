package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReadWrite: -read commands run together, a -write command runs alone:
// two readers overlap (each waits for the other to start), the writer
// starts only after both ended and holds the write lock (mode write) while
// it runs.
func TestReadWrite(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	// Each reader says it started, then waits (up to 10 s) for the other's
	// start, and for the test's go-ahead: they can only both finish if they
	// hold the read lock together.
	reader := func(me, other string) *proc {
		return s.start(t, nil, "lock", "-read", name, "--", "sh", "-c",
			`echo "start $1" >> "$3"; : > "$4/$1"; i=0; while { [ ! -e "$4/$2" ] || [ ! -e "$4/go" ]; } && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; echo "end $1" >> "$3"`,
			"sh", me, other, log, dir)
	}
	r1, r2 := reader("r1", "r2"), reader("r2", "r1")
	s.waitLocked(t, name)
	if st := s.status(t, name); st.Mode != "read" || len(st.Holders) == 0 {
		t.Fatalf("status of the read-write lock = %+v, want read mode and its readers", st)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w := s.start(t, nil, "lock", "-write", name, "--", "sh", "-c",
		`echo "start w $(redis-cli -p $2 hget "$LUALOCK_NAME" mode)" >> "$1"`, "sh", log, strconv.Itoa(portOf(s.addr)))
	for _, p := range []*proc{r1, r2, w} {
		if code := p.wait(t, 20*time.Second); code != 0 {
			t.Fatalf("exit %d: %s", code, p.stderr.String())
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "start r") || !strings.HasPrefix(lines[1], "start r") || lines[4] != "start w write" {
		t.Fatalf("log:\n%s\nwant both readers started before either ended, then the writer alone in write mode", b)
	}
	if s.exists(t, name) {
		t.Fatalf("lock %s left after the commands", name)
	}
}

func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	p, _ := strconv.Atoi(addr[i+1:])
	return p
}

// TestFencedToken: -fenced puts the hold's token in LUALOCK_TOKEN, one
// larger on each run.
func TestFencedToken(t *testing.T) {
	s := newServer(t)
	name := lockName(t)
	var tokens []int64
	for range 3 {
		p, code := s.run(t, nil, "lock", "-fenced", name, "--", "sh", "-c", `echo "$LUALOCK_TOKEN"`)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, p.stderr.String())
		}
		tk, err := strconv.ParseInt(strings.TrimSpace(p.stdout.String()), 10, 64)
		if err != nil {
			t.Fatalf("LUALOCK_TOKEN %q: %v", p.stdout.String(), err)
		}
		tokens = append(tokens, tk)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] != tokens[i-1]+1 {
			t.Fatalf("tokens %v, want one larger on each run", tokens)
		}
	}
	if got := s.rdb.Get(t.Context(), "redisson_lock_token:{"+name+"}").Val(); got != strconv.FormatInt(tokens[2], 10) {
		t.Fatalf("token counter %q, want %d", got, tokens[2])
	}
	s.rdb.Del(t.Context(), "redisson_lock_token:{"+name+"}")
	if _, code := s.run(t, nil, "lock", "-fenced", "-fair", name, "--", "true"); code != exitUsage {
		t.Fatalf("-fenced -fair: exit %d, want %d", code, exitUsage)
	}
}
