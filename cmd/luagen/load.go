package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/cmd/luagen/gen"
)

// loader loads scripts into one Redis server or every node of a cluster.
type loader interface {
	// ping checks that Redis answers.
	ping(ctx context.Context) error
	// load sends SCRIPT LOAD and checks the SHA1 Redis returns; it returns
	// the number of servers that loaded the script.
	load(ctx context.Context, s *gen.Script) (int, error)
	close() error
}

// load SCRIPT LOADs every script and checks its SHA1, printing one line per
// script on stdout: "loaded NAME SHA1" or "FAILED NAME: error".
func (c *cli) load(w *workspace, o *options) int {
	l, where, err := newLoader(o.addr, o.cluster, o.timeout)
	if err != nil {
		c.errorf("load: -addr %s: %v", redact(o.addr), err)
		fmt.Fprint(c.stderr, usage)
		return 2
	}
	defer l.close()
	// go-redis logs failed dials on os.Stderr; the errors reach us anyway and
	// are reported once, below. The logger is global: fine in a command.
	redis.SetLogger(quietLogger{})
	scripts := c.lintedScripts(w)
	if scripts == nil {
		return 1
	}
	if w.cfg.Library != "" {
		// Every script is built into one Functions library, loaded once.
		src := gen.BuildLibrary(w.cfg.Library, scripts)
		scripts = []*gen.Script{{Name: w.cfg.Library, Library: w.cfg.Library, Source: src, SHA1: "library"}}
	}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), replaceKey{}, o.replace), o.timeout)
	defer cancel()
	if err := l.ping(ctx); err != nil {
		c.errorf("cannot reach Redis at %s: %v", where, timeoutHint(ctx, err, o.timeout))
		return 1
	}
	failed := 0
	for _, s := range scripts {
		n, err := l.load(ctx, s)
		if err != nil {
			fmt.Fprintf(c.stdout, "FAILED %s: %v\n", s.Name, timeoutHint(ctx, err, o.timeout))
			failed++
			continue
		}
		if o.cluster {
			fmt.Fprintf(c.stdout, "loaded %s %s (%s)\n", s.Name, s.SHA1, plural(n, "node"))
		} else {
			fmt.Fprintf(c.stdout, "loaded %s %s\n", s.Name, s.SHA1)
		}
	}
	if failed > 0 {
		c.errorf("%d of %d scripts failed to load into %s", failed, len(scripts), where)
		return 1
	}
	return 0
}

// quietLogger drops go-redis's log messages.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// timeoutHint names the -timeout when the context's deadline passed.
func timeoutHint(ctx context.Context, err error, d time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w (timed out after %v, see -timeout)", err, d)
	}
	return err
}

// newLoader makes the client of -addr. where names the server(s) in
// messages, without credentials.
func newLoader(addr string, cluster bool, timeout time.Duration) (l loader, where string, err error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, "", errors.New("empty address")
	}
	if cluster {
		var opts *redis.ClusterOptions
		if strings.Contains(addr, "://") {
			if opts, err = redis.ParseClusterURL(addr); err != nil {
				return nil, "", urlErr(err)
			}
		} else {
			opts = &redis.ClusterOptions{}
			for _, a := range strings.Split(addr, ",") {
				if a = strings.TrimSpace(a); a != "" {
					opts.Addrs = append(opts.Addrs, withPort(a))
				}
			}
		}
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = timeout, timeout, timeout
		opts.ContextTimeoutEnabled = true
		opts.MaxRetries = 1 // fail with the cause, not the -timeout
		return &clusterLoader{redis.NewClusterClient(opts)}, "cluster " + strings.Join(opts.Addrs, ","), nil
	}
	var opts *redis.Options
	switch {
	case strings.Contains(addr, "://"):
		if opts, err = redis.ParseURL(addr); err != nil {
			return nil, "", urlErr(err)
		}
	case strings.Contains(addr, ","):
		return nil, "", errors.New("several addresses: pass -cluster to load into a Redis Cluster")
	default:
		opts = &redis.Options{Addr: withPort(addr)}
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = timeout, timeout, timeout
	opts.ContextTimeoutEnabled = true
	opts.MaxRetries = 1 // fail with the cause, not the -timeout
	where = opts.Addr
	if opts.DB != 0 {
		where = fmt.Sprintf("%s db %d", opts.Addr, opts.DB)
	}
	return &clientLoader{redis.NewClient(opts)}, where, nil
}

// redact hides the password of a redis:// URL, for messages.
func redact(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.User != nil {
		return u.Redacted()
	}
	if strings.Contains(addr, "@") {
		return "(a URL with credentials)"
	}
	return addr
}

// urlErr drops the URL, which may hold a password, from a parse error.
func urlErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// withPort adds Redis's default port to a bare host name.
func withPort(addr string) string {
	if strings.Contains(addr, ":") {
		return addr
	}
	return addr + ":6379"
}

// scriptLoad loads s into one server and checks the SHA1.
func scriptLoad(ctx context.Context, c *redis.Client, s *gen.Script) error {
	if s.Library != "" {
		return functionLoad(ctx, c, s)
	}
	sha, err := c.ScriptLoad(ctx, string(s.Source)).Result()
	if err != nil {
		return err
	}
	if sha != s.SHA1 {
		return fmt.Errorf("redis returned sha1 %s, want %s", sha, s.SHA1)
	}
	return nil
}

// replaceKey marks, in a load's context, that a Functions library replaces
// one of its name (-replace).
type replaceKey struct{}

// functionLoad loads a Functions library with FUNCTION LOAD (REPLACE with
// -replace) and verifies that Redis holds its code, byte for byte, with
// FUNCTION LIST LIBRARYNAME ... WITHCODE.
func functionLoad(ctx context.Context, c *redis.Client, s *gen.Script) error {
	load := c.FunctionLoad
	if replace, _ := ctx.Value(replaceKey{}).(bool); replace {
		load = c.FunctionLoadReplace
	}
	name, err := load(ctx, string(s.Source)).Result()
	if err != nil {
		if strings.Contains(err.Error(), "already exists") {
			return fmt.Errorf("%w (load -replace replaces it)", err)
		}
		return err
	}
	if name != s.Library {
		return fmt.Errorf("redis loaded library %q, want %q", name, s.Library)
	}
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: s.Library, WithCode: true}).Result()
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, l := range libs {
		if l.Name == s.Library && l.Code == string(s.Source) {
			return nil
		}
	}
	return fmt.Errorf("verify: FUNCTION LIST has no library %s with this code", s.Library)
}

type clientLoader struct{ c *redis.Client }

func (l *clientLoader) ping(ctx context.Context) error { return l.c.Ping(ctx).Err() }

func (l *clientLoader) load(ctx context.Context, s *gen.Script) (int, error) {
	return 1, scriptLoad(ctx, l.c, s)
}

func (l *clientLoader) close() error { return l.c.Close() }

// clusterLoader loads into every node of a cluster, masters and replicas:
// replicas run the read-only scripts under EVALSHA_RO.
type clusterLoader struct{ c *redis.ClusterClient }

func (l *clusterLoader) ping(ctx context.Context) error { return l.c.Ping(ctx).Err() }

func (l *clusterLoader) load(ctx context.Context, s *gen.Script) (int, error) {
	var (
		mu   sync.Mutex
		n    int
		errs []error
	)
	err := l.c.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		err := scriptLoad(ctx, node, s)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			err = fmt.Errorf("%s: %w", node.Options().Addr, err)
			errs = append(errs, err)
			return err
		}
		n++
		return nil
	})
	if len(errs) > 0 {
		return n, errors.Join(errs...)
	}
	if err != nil {
		return n, err
	}
	if n == 0 {
		return 0, errors.New("the cluster has no nodes")
	}
	return n, nil
}

func (l *clusterLoader) close() error { return l.c.Close() }
