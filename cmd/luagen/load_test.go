package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const (
	getSHA1 = "98b21c48112436b1676b40ce070f23bb81fff7e8"
	setSHA1 = "ba5186b9832e83c9015c476a057455a772f56773"
)

func scriptsExist(t *testing.T, addr string, shas ...string) []bool {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	exist, err := c.ScriptExists(context.Background(), shas...).Result()
	if err != nil {
		t.Fatal(err)
	}
	return exist
}

func TestLoad(t *testing.T) {
	scriptsDir(t)
	mr := miniredis.RunT(t)
	stdout, stderr := runWant(t, 0, "load", "-addr", mr.Addr())
	want := "loaded get " + getSHA1 + "\nloaded set " + setSHA1 + "\n"
	if stdout != want || stderr != "" {
		t.Errorf("stdout %q, stderr %q; want stdout %q", stdout, stderr, want)
	}
	if exist := scriptsExist(t, mr.Addr(), getSHA1, setSHA1); !exist[0] || !exist[1] {
		t.Errorf("SCRIPT EXISTS after load: %v", exist)
	}
}

func TestLoadURLFromEnv(t *testing.T) {
	scriptsDir(t)
	mr := miniredis.RunT(t)
	t.Setenv("REDIS_URL", "redis://"+mr.Addr()+"/3")
	stdout, _ := runWant(t, 0, "load", "-timeout", "5s")
	if !strings.Contains(stdout, "loaded set "+setSHA1) {
		t.Errorf("stdout %q", stdout)
	}
	if exist := scriptsExist(t, mr.Addr(), setSHA1); !exist[0] {
		t.Error("set.lua not loaded")
	}
}

func TestLoadUnreachable(t *testing.T) {
	scriptsDir(t)
	// A port nothing listens on: bind one, then close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	stdout, stderr := runWant(t, 1, "load", "-addr", addr, "-timeout", "3s")
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	if prefix := "luagen: cannot reach Redis at " + addr + ": "; !strings.HasPrefix(stderr, prefix) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr %q, want one line starting %q", stderr, prefix)
	}
}

func TestLoadRefusesBadScripts(t *testing.T) {
	dir := scriptsDir(t)
	writeFile(t, dir+"/lua/bad.lua", "return 1\n") // no @return
	mr := miniredis.RunT(t)
	stdout, stderr := runWant(t, 1, "load", "-addr", mr.Addr())
	if stdout != "" || !strings.Contains(stderr, "lua/bad.lua:1:1: header: missing @return") || !strings.HasSuffix(stderr, "luagen: 1 error\n") {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	if exist := scriptsExist(t, mr.Addr(), setSHA1); exist[0] {
		t.Error("a script was loaded despite the errors")
	}
}

// TestLoadRefusesLintErrors: load runs the lint rules as generate does; a
// planted global assignment and an out-of-range KEYS[3] stop the deploy.
func TestLoadRefusesLintErrors(t *testing.T) {
	dir := scriptsDir(t)
	writeFile(t, dir+"/lua/planted.lua", "-- @key k a key\n-- @return nil\nleaked = redis.call('get', KEYS[1])\nredis.call('del', KEYS[3])\nreturn nil\n")
	mr := miniredis.RunT(t)
	stdout, stderr := runWant(t, 1, "load", "-addr", mr.Addr())
	for _, want := range []string{"lua/planted.lua:3:1: global-assign: ", "lua/planted.lua:4:", "keys-range: ", "luagen: 2 errors\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing loaded", stdout)
	}
	if exist := scriptsExist(t, mr.Addr(), getSHA1, setSHA1); exist[0] || exist[1] {
		t.Error("a script was loaded despite the lint errors")
	}
}

func TestLoadBadAddr(t *testing.T) {
	scriptsDir(t)
	for _, args := range [][]string{
		{"load", "-addr", "redis://host:port:bad"},
		{"load", "-addr", "a:1,b:2"}, // several addresses need -cluster
		{"load", "-timeout", "0s"},
	} {
		_, stderr := runWant(t, 2, args...)
		if !strings.HasPrefix(stderr, "luagen: load: ") || !strings.Contains(stderr, "usage: luagen") {
			t.Errorf("%v: stderr %q", args, stderr)
		}
	}
}

// TestLoadWrongSHA1 checks the SHA1 verification against a fake server that
// answers SCRIPT LOAD with another SHA1.
func TestLoadWrongSHA1(t *testing.T) {
	scriptsDir(t)
	addr := fakeRedis(t, func(cmd []string) string {
		switch strings.ToUpper(cmd[0]) {
		case "PING":
			return "+PONG\r\n"
		case "SCRIPT":
			sha := strings.Repeat("0", 40)
			if strings.Contains(cmd[2], "GET") {
				return "$40\r\n" + getSHA1 + "\r\n"
			}
			return "$40\r\n" + sha + "\r\n"
		}
		return "-ERR unknown command\r\n"
	})
	stdout, stderr := runWant(t, 1, "load", "-addr", addr)
	want := "loaded get " + getSHA1 + "\nFAILED set: redis returned sha1 " + strings.Repeat("0", 40) + ", want " + setSHA1 + "\n"
	if stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	if want := "luagen: 1 of 2 scripts failed to load into " + addr + "\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}

// fakeRedis serves RESP requests with reply until the test ends and
// returns its address.
func fakeRedis(t *testing.T, reply func(cmd []string) string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					cmd, err := readCommand(r)
					if err != nil {
						return
					}
					if _, err := io.WriteString(conn, reply(cmd)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	cmd := make([]string, n)
	for i := range cmd {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		cmd[i] = string(buf[:size])
	}
	return cmd, nil
}

// TestLoadBadAddrHidesPassword checks that a bad URL's message does not
// print its password.
func TestLoadBadAddrHidesPassword(t *testing.T) {
	scriptsDir(t)
	for _, addr := range []string{"redis://user:s3cret@host:6379/0?bogus=1", "redis://:s3cret@host/notadb", "redis://u:s3cret@h%zz"} {
		_, stderr := runWant(t, 2, "load", "-addr", addr)
		if strings.Contains(stderr, "s3cret") {
			t.Errorf("-addr %s: the message shows the password: %q", addr, stderr)
		}
		if !strings.HasPrefix(stderr, "luagen: load: -addr ") {
			t.Errorf("-addr %s: stderr %q", addr, stderr)
		}
	}
}
