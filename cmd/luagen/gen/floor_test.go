package gen

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lualock/lualock/cmd/luagen/internal/redistest"
)

// The go-redis and Go versions luart supports at the lowest (its go.mod
// says the same; docs/RELEASING.md says how they were found), and the
// current ones lualock itself builds with.
const (
	floorGoRedis = "v9.0.0"
	floorGo      = "1.18"
)

// TestConsumerFloor builds, in a temporary folder, a module of a user of
// luagen that pins go-redis and Go at luart's floor (and, in a second
// case, at the versions lualock's own go.mod has): it generates wrappers
// for the scripts of testdata/floor/lua into it, runs go mod tidy as a
// user adding luart would, checks that the module's go directive and
// go-redis requirement did not move and that luart is its only new
// requirement, vets it, and runs the wrappers against a real
// redis-server (testdata/floor/consumer_test.go). LUAGEN_FLOOR_TOOLCHAIN
// (for example go1.18.10) runs the consumer's go commands with that
// toolchain (GOTOOLCHAIN), as CI does.
func TestConsumerFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a module of its own")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	luart, err := filepath.Abs(filepath.Join("..", "..", "..", "luart"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(luart, "go.mod")); err != nil {
		t.Skipf("luart's folder is not beside this module (outside the repository): %v", err)
	}
	cases := []struct{ name, goVersion, goRedis string }{{"floor", floorGo, floorGoRedis}}
	if b, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod")); err == nil {
		if m := regexp.MustCompile(`(?m)^\s*github.com/redis/go-redis/v9 (v\S+)`).FindSubmatch(b); m != nil {
			cases = append(cases, struct{ name, goVersion, goRedis string }{"lualock's", "1.24.0", string(m[1])})
		}
	}
	addr := redistest.Start(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			goMod := "module example.com/consumer\n\ngo " + c.goVersion + "\n\nrequire github.com/redis/go-redis/v9 " + c.goRedis + "\n"
			writeFloorFile(t, filepath.Join(dir, "go.mod"), []byte(goMod))
			// The consumer uses go-redis already.
			writeFloorFile(t, filepath.Join(dir, "app.go"), []byte("package app\n\nimport \"github.com/redis/go-redis/v9\"\n\n// Client connects.\nfunc Client(addr string) *redis.Client { return redis.NewClient(&redis.Options{Addr: addr}) }\n"))
			env := append(os.Environ(), "GOFLAGS=-mod=mod", "LUAGEN_FLOOR_ADDR="+addr)
			if tc := os.Getenv("LUAGEN_FLOOR_TOOLCHAIN"); tc != "" && c.name == "floor" {
				env = append(env, "GOTOOLCHAIN="+tc)
			} else {
				env = append(env, "GOTOOLCHAIN=local")
			}
			gocmd := func(args ...string) string {
				t.Helper()
				cmd := exec.Command(goTool, args...)
				cmd.Dir, cmd.Env = dir, env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return string(out)
			}
			// The consumer's own go.sum for the go-redis it pins.
			gocmd("mod", "download", "github.com/redis/go-redis/v9")
			gocmd("mod", "tidy")
			before := readFloorFile(t, filepath.Join(dir, "go.mod"))

			files, err := Generate(os.DirFS(filepath.Join("testdata", "floor")), Config{Src: "lua", Package: "scripts"})
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			files["consumer_test.go"] = readFloorFile(t, filepath.Join("testdata", "floor", "consumer_test.go"))
			if err := os.Mkdir(filepath.Join(dir, "scripts"), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range files {
				writeFloorFile(t, filepath.Join(dir, "scripts", name), b)
			}
			// Before luart is published a user points the require at a
			// clone (docs/RELEASING.md); then go mod tidy, as they would.
			gocmd("mod", "edit", "-require=github.com/lualock/lualock/luart@v0.0.0", "-replace=github.com/lualock/lualock/luart="+luart)
			gocmd("mod", "tidy")
			after := string(readFloorFile(t, filepath.Join(dir, "go.mod")))
			for _, want := range []string{"\ngo " + c.goVersion + "\n", "github.com/redis/go-redis/v9 " + c.goRedis + "\n"} {
				if !strings.Contains(after, want) {
					t.Errorf("go.mod moved: it lost %q\nbefore:\n%s\nafter:\n%s", strings.TrimSpace(want), before, after)
				}
			}
			if strings.Contains(after, "toolchain ") {
				t.Errorf("go mod tidy added a toolchain line:\n%s", after)
			}
			// Every requirement after is one of before, or luart.
			for _, line := range strings.Split(after, "\n") {
				f := strings.Fields(line)
				if len(f) < 2 || !strings.HasPrefix(f[1], "v") || strings.HasPrefix(line, "replace") || strings.Contains(line, "=>") {
					continue
				}
				if f[0] == "require" {
					f = f[1:]
				}
				if f[0] != "github.com/lualock/lualock/luart" && !strings.Contains(string(before), f[0]+" "+f[1]) {
					t.Errorf("go mod tidy added or moved %s %s\nbefore:\n%s\nafter:\n%s", f[0], f[1], before, after)
				}
			}
			gocmd("vet", "./...")
			out := gocmd("test", "-count=1", "-v", "./...")
			if !strings.Contains(out, "--- PASS: TestWrappers") {
				t.Errorf("the consumer's test did not pass:\n%s", out)
			}
			t.Logf("%s", gocmd("version"))
		})
	}
}

func writeFloorFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFloorFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
