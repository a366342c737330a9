package interop

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Java agent (agent/Agent.java) drives the real Redisson client. Its
// jars come from the environment:
const (
	// envJars lists the Redisson jars to test against, separated by ":"
	// (os.PathListSeparator); their file names carry the version
	// (redisson-4.7.0.jar); a relative path is taken from the repository's
	// root. CI sets it to shared/redisson's 4.7.0 and 3.16.8.
	envJars = "LUALOCK_REDISSON_JARS"
	// envDeps overrides the classpath of Redisson's dependencies; default:
	// the Debian 12 jars of /usr/share/java that shared/redisson's README
	// lists.
	envDeps = "LUALOCK_REDISSON_DEPS"
	// envRequire, "1", makes a missing jar or JDK a failure (CI sets it).
	envRequire = "LUALOCK_REQUIRE_REDISSON"
)

// debianDeps are Redisson's run-time dependencies as Debian 12 packages them.
var debianDeps = []string{
	"netty-buffer", "netty-codec", "netty-codec-dns", "netty-common", "netty-handler",
	"netty-resolver", "netty-resolver-dns", "netty-transport",
	"netty-transport-native-unix-common", "netty-transport-native-epoll",
	"netty-transport-native-kqueue", "netty-resolver-dns-native-macos",
	"jackson-core", "jackson-databind", "jackson-annotations", "jackson-dataformat-yaml",
	"snakeyaml", "slf4j-api", "byte-buddy", "objenesis", "caffeine", "reactive-streams",
	"geronimo-jcache-1.0-spec", "slf4j-nop",
}

// redissonJar is one jar to test against.
type redissonJar struct {
	path    string
	version [3]int
	classes string // the compiled agent
}

func (j redissonJar) String() string {
	return fmt.Sprintf("redisson-%d.%d.%d", j.version[0], j.version[1], j.version[2])
}

// atLeast reports whether the jar's version is v or later.
func (j redissonJar) atLeast(major, minor int) bool {
	return j.version[0] > major || j.version[0] == major && j.version[1] >= minor
}

// skipOrFail skips the test loudly, or fails it when envRequire is "1".
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(envRequire) == "1" {
		t.Fatalf("%s=1 but %s", envRequire, msg)
	}
	fmt.Fprintf(os.Stderr, "\n!!!!!!!!!!\n!!! SKIP: %s\n!!! (set %s=1 to make this a failure)\n!!!!!!!!!!\n\n", msg, envRequire)
	t.Skip("SKIP: " + msg)
}

var versionRE = regexp.MustCompile(`redisson-(\d+)\.(\d+)\.(\d+)`)

var (
	jarsOnce sync.Once
	jars     []redissonJar
	jarsErr  error
	depsCP   string
)

// redissonJars returns the jars of envJars with the agent compiled against
// each, skipping (or failing) the test when there are none or no JDK.
func redissonJars(t *testing.T) []redissonJar {
	t.Helper()
	jarsOnce.Do(func() { jars, jarsErr = compileAgents() })
	if jarsErr != nil {
		skipOrFail(t, "%v", jarsErr)
	}
	return jars
}

func compileAgents() ([]redissonJar, error) {
	list := os.Getenv(envJars)
	if list == "" {
		return nil, fmt.Errorf("%s is not set: the Redisson interop tests need Redisson jars (e.g. %s=/path/redisson-4.7.0.jar:/path/redisson-3.16.8.jar; see docs/TESTING.md, The Redisson interop suite)", envJars, envJars)
	}
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not on PATH: install a JDK (Debian: openjdk-17-jdk-headless)", tool)
		}
	}
	depsCP = os.Getenv(envDeps)
	if depsCP == "" {
		var cp []string
		for _, d := range debianDeps {
			p := filepath.Join("/usr/share/java", d+".jar")
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("%s missing: install the Debian packages listed in .ci/run, or set %s", p, envDeps)
			}
			cp = append(cp, p)
		}
		depsCP = strings.Join(cp, string(os.PathListSeparator))
	}
	dir, err := os.MkdirTemp("", "lualock-interop-agent-")
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { _ = os.RemoveAll(dir) })
	var out []redissonJar
	for i, p := range filepath.SplitList(list) {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			// go test runs in this package's directory: a relative path is
			// taken from the repository's root, where make test runs.
			p = filepath.Join("..", "..", p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s: %v", envJars, err)
		}
		m := versionRE.FindStringSubmatch(filepath.Base(p))
		if m == nil {
			return nil, fmt.Errorf("%s: cannot tell the Redisson version of %s (want a file name like redisson-4.7.0.jar)", envJars, p)
		}
		j := redissonJar{path: p, classes: filepath.Join(dir, strconv.Itoa(i))}
		for k := range 3 {
			j.version[k], _ = strconv.Atoi(m[k+1])
		}
		cmd := exec.Command("javac", "-nowarn", "-d", j.classes, "-cp", p+string(os.PathListSeparator)+depsCP, filepath.Join("agent", "Agent.java"))
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("javac Agent.java against %s: %v\n%s", p, err, b)
		}
		out = append(out, j)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no jar", envJars)
	}
	return out, nil
}

// cleanups run at the end of TestMain.
var cleanups []func()

// agent is one running Java agent: one Redisson client.
type agent struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
	mu     sync.Mutex
	next   int
	wait   map[int]chan reply
	done   chan struct{} // the reader has exited
}

// reply is the agent's answer to one command.
type reply struct {
	ok     bool
	val    string
	t0, t1 time.Time // before and after Redisson's call
	err    string
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startAgent starts the agent of jar on the given Redis addresses
// (host:port; cluster: its nodes) with Redisson's lockWatchdogTimeout
// watchdog; the test's cleanup stops it.
func startAgent(t *testing.T, j redissonJar, cluster bool, watchdog time.Duration, addrs []string) *agent {
	t.Helper()
	mode := "single"
	if cluster {
		mode = "cluster"
	}
	return runAgent(t, j, watchdog, mode, redisURLs(addrs)...)
}

// startSentinelAgent starts the agent of jar on a Sentinel deployment:
// Redisson reaches the primary that the Sentinels at addrs name master.
func startSentinelAgent(t *testing.T, j redissonJar, watchdog time.Duration, master string, addrs []string) *agent {
	t.Helper()
	return runAgent(t, j, watchdog, "sentinel", append([]string{master}, redisURLs(addrs)...)...)
}

func redisURLs(addrs []string) []string {
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "redis://" + a
	}
	return urls
}

// runAgent starts the agent with its mode and the arguments after
// WATCHDOG_MS (see Agent.java).
func runAgent(t *testing.T, j redissonJar, watchdog time.Duration, mode string, rest ...string) *agent {
	t.Helper()
	args := []string{"-XX:TieredStopAtLevel=1", "-Xss512k", "-cp", strings.Join([]string{j.classes, j.path, depsCP}, string(os.PathListSeparator)), "Agent", mode, strconv.FormatInt(watchdog.Milliseconds(), 10)}
	args = append(args, rest...)
	a := &agent{t: t, cmd: exec.Command("java", args...), stderr: &syncBuffer{}, wait: map[int]chan reply{}, done: make(chan struct{})}
	a.cmd.Stderr = a.stderr
	var err error
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go a.read(stdout, ready)
	t.Cleanup(a.stop)
	select {
	case <-ready:
	case <-a.done:
		t.Fatalf("agent %s exited before it was ready:\n%s", j, a.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("agent %s not ready after 60s:\n%s", j, a.stderr.String())
	}
	return a
}

// read routes the agent's answers until its stdout closes.
func (a *agent) read(r io.Reader, ready chan struct{}) {
	defer close(a.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" {
			close(ready)
			continue
		}
		f := strings.SplitN(line, " ", 3)
		id, err := strconv.Atoi(f[0])
		if err != nil || len(f) < 3 {
			continue // not ours (a library's line on stdout)
		}
		var rp reply
		if f[1] == "ok" {
			v := strings.Fields(f[2])
			rp.ok, rp.val = true, v[0]
			if len(v) == 3 {
				rp.t0, rp.t1 = microsTime(v[1]), microsTime(v[2])
			}
		} else {
			rp.err = f[2]
		}
		a.mu.Lock()
		ch := a.wait[id]
		delete(a.wait, id)
		a.mu.Unlock()
		if ch != nil {
			ch <- rp
		}
	}
}

func microsTime(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMicro(n)
}

// send sends one command for owner (one Redisson thread) and returns the
// channel its reply comes on.
func (a *agent) send(owner, op string, args ...any) <-chan reply {
	a.mu.Lock()
	a.next++
	id := a.next
	ch := make(chan reply, 1)
	a.wait[id] = ch
	a.mu.Unlock()
	parts := []string{strconv.Itoa(id), owner, op}
	for _, x := range args {
		parts = append(parts, fmt.Sprint(x))
	}
	if _, err := io.WriteString(a.stdin, strings.Join(parts, " ")+"\n"); err != nil {
		ch <- reply{err: "write to agent: " + err.Error()}
	}
	return ch
}

// await waits for a reply (up to limit) and fails the test on an error.
func (a *agent) await(t *testing.T, ch <-chan reply, what string, limit time.Duration) reply {
	t.Helper()
	select {
	case r := <-ch:
		if !r.ok {
			t.Fatalf("redisson %s: %s", what, r.err)
		}
		return r
	case <-a.done:
		t.Fatalf("redisson %s: the agent exited:\n%s", what, a.stderr.String())
	case <-time.After(limit):
		t.Fatalf("redisson %s: no reply within %v", what, limit)
	}
	return reply{}
}

// do sends a command and waits for its reply (up to 30s).
func (a *agent) do(t *testing.T, owner, op string, args ...any) reply {
	t.Helper()
	return a.await(t, a.send(owner, op, args...), fmt.Sprint(owner, " ", op, " ", args), 30*time.Second)
}

// stop asks the agent to quit and waits for it, killing it (by its pid)
// after 10s.
func (a *agent) stop() {
	_, _ = io.WriteString(a.stdin, "quit\n")
	_ = a.stdin.Close()
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
	_ = a.cmd.Wait()
	if a.t.Failed() {
		a.t.Logf("agent stderr:\n%s", a.stderr.String())
	}
}
