package lualockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/lualock/lualock"
	"github.com/lualock/lualock/extra/lualockotel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collected reads every metric from reader, by name.
func collected(t *testing.T, reader sdkmetric.Reader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lualockotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, lualockotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func attrs(kv ...attribute.KeyValue) attribute.Set { return attribute.NewSet(kv...) }

// sum returns the counter's value for the attribute set: 0 when nothing
// was recorded, -1 when the metric is not a counter.
func sum(t *testing.T, data map[string]metricdata.Aggregation, name string, set attribute.Set) int64 {
	t.Helper()
	if data[name] == nil {
		return 0
	}
	s, ok := data[name].(metricdata.Sum[int64])
	if !ok {
		t.Errorf("%s: %T, want a Sum[int64]", name, data[name])
		return -1
	}
	for _, dp := range s.DataPoints {
		if dp.Attributes.Equals(&set) {
			return dp.Value
		}
	}
	return 0
}

// hist returns the histogram's count and sum for the attribute set.
func hist(t *testing.T, data map[string]metricdata.Aggregation, name string, set attribute.Set) (uint64, float64) {
	t.Helper()
	if data[name] == nil {
		return 0, 0
	}
	h, ok := data[name].(metricdata.Histogram[float64])
	if !ok {
		t.Errorf("%s: %T, want a Histogram[float64]", name, data[name])
		return 0, 0
	}
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&set) {
			return dp.Count, dp.Sum
		}
	}
	return 0, 0
}

// gauge returns the gauge's value for the attribute set, or -1.
func gauge(t *testing.T, data map[string]metricdata.Aggregation, name string, set attribute.Set) int64 {
	t.Helper()
	g, ok := data[name].(metricdata.Gauge[int64])
	if !ok {
		t.Errorf("%s: %T, want a Gauge[int64]", name, data[name])
		return -1
	}
	for _, dp := range g.DataPoints {
		if dp.Attributes.Equals(&set) {
			return dp.Value
		}
	}
	return -1
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// otelEnv starts a miniredis with a client on it and a meter provider
// that a ManualReader reads; the test's cleanup stops them.
func otelEnv(t *testing.T) (*miniredis.Miniredis, *redis.Client, *sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mr, rdb, reader, mp
}

// TestInstrumentation: the values recorded for acquisitions (by kind and
// outcome), their wait, handoffs, hold time, lost holds, renewals and the
// client's gauges are read back through a ManualReader, and each
// acquisition is a span.
func TestInstrumentation(t *testing.T) {
	ctx := t.Context()
	mr, rdb, reader, mp := otelEnv(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	otl, err := lualockotel.New(lualockotel.WithMeterProvider(mp), lualockotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c, err := lualock.New(rdb, lualock.Options{WatchdogLease: 1500 * time.Millisecond, Observer: otl.Observer()})
	if err != nil {
		t.Fatalf("lualock.New: %v", err)
	}
	defer c.Close()
	reg, err := otl.RegisterStats(c)
	if err != nil {
		t.Fatalf("RegisterStats: %v", err)
	}
	defer reg.Unregister()

	reentrant, fair := lualockotel.KindKey.String("reentrant"), lualockotel.KindKey.String("fair")
	client := attrs(lualockotel.ClientKey.String(c.ID()))

	// Two acquisitions, one of them after a wait (a handoff), one give-up.
	a, b := c.NewLock("otel"), c.NewLock("otel")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(ctx, 10*time.Millisecond); !errors.Is(err, lualock.ErrNotObtained) {
		t.Fatalf("TryLock = %v, want ErrNotObtained", err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	waitUntil(t, func() bool { return c.Stats().Waiters == 1 })
	data := collected(t, reader)
	if w := gauge(t, data, "lualock.waiters", client); w != 1 {
		t.Errorf("lualock.waiters = %d, want 1", w)
	}
	if w := gauge(t, data, "lualock.watched", client); w != 1 {
		t.Errorf("lualock.watched = %d, want 1", w)
	}
	if s := gauge(t, data, "lualock.subscriptions", client); s != 1 {
		t.Errorf("lualock.subscriptions = %d, want 1", s)
	}
	if n := gauge(t, data, "lualock.pubsub.connections", client); n != 1 {
		t.Errorf("lualock.pubsub.connections = %d, want 1", n)
	}
	// A renewal of a's hold before it is released.
	waitUntil(t, func() bool {
		return sum(t, collected(t, reader), "lualock.renewals", attrs(lualockotel.OutcomeKey.String("ok"))) >= 1
	})
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// b's hold is lost: deleted from outside, found gone by a renewal.
	mr.Del("otel")
	<-b.Done()
	// A fair lock held and released.
	f := c.NewFairLock("otel-fair")
	if err := f.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	data = collected(t, reader)
	outcome := func(kind attribute.KeyValue, o string) attribute.Set {
		return attrs(kind, lualockotel.OutcomeKey.String(o))
	}
	reason := func(kind attribute.KeyValue, r string) attribute.Set {
		return attrs(kind, lualockotel.ReasonKey.String(r))
	}
	for _, tc := range []struct {
		name string
		set  attribute.Set
		want int64
	}{
		{"lualock.acquisitions", outcome(reentrant, "acquired"), 2},
		{"lualock.acquisitions", outcome(reentrant, "not_obtained"), 1},
		{"lualock.acquisitions", outcome(fair, "acquired"), 1},
		{"lualock.handoffs", attrs(reentrant), 1},
		{"lualock.handoffs", attrs(fair), 0},
		{"lualock.holds.lost", reason(reentrant, "lost_gone"), 1},
		{"lualock.holds.lost", reason(reentrant, "released"), 0},
		{"lualock.renewals", attrs(lualockotel.OutcomeKey.String("error")), 0},
	} {
		if got := sum(t, data, tc.name, tc.set); got != tc.want {
			t.Errorf("%s{%s} = %d, want %d", tc.name, tc.set.Encoded(attribute.DefaultEncoder()), got, tc.want)
		}
	}
	if n := sum(t, data, "lualock.renewal.calls", attrs(lualockotel.OutcomeKey.String("ok"))); n < 1 {
		t.Errorf("lualock.renewal.calls{ok} = %d, want at least 1", n)
	}
	if n, s := hist(t, data, "lualock.acquire.duration", outcome(reentrant, "not_obtained")); n != 1 || s < 0.010 {
		t.Errorf("lualock.acquire.duration{not_obtained}: count %d sum %vs, want 1 wait of at least 10ms", n, s)
	}
	if n, _ := hist(t, data, "lualock.acquire.duration", outcome(reentrant, "acquired")); n != 2 {
		t.Errorf("lualock.acquire.duration{acquired}: count %d, want 2", n)
	}
	if n, s := hist(t, data, "lualock.hold.duration", reason(reentrant, "released")); n != 1 || s <= 0 {
		t.Errorf("lualock.hold.duration{released}: count %d sum %v, want 1 hold", n, s)
	}
	if n, _ := hist(t, data, "lualock.hold.duration", reason(reentrant, "lost_gone")); n != 1 {
		t.Errorf("lualock.hold.duration{lost_gone}: count %d, want 1", n)
	}
	if n, _ := hist(t, data, "lualock.hold.duration", reason(fair, "released")); n != 1 {
		t.Errorf("lualock.hold.duration{fair, released}: count %d, want 1", n)
	}

	ended := spans.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans, want 4 (one per acquisition)", len(ended))
	}
	for _, s := range ended {
		if s.Name() != "lualock.acquire" || !s.EndTime().After(s.StartTime()) {
			t.Errorf("span %q from %v to %v, want lualock.acquire with a duration", s.Name(), s.StartTime(), s.EndTime())
		}
	}
	if got := attrs(ended[0].Attributes()...); !got.HasValue(lualockotel.NameKey) {
		t.Errorf("span attributes %v, want %s", got.ToSlice(), lualockotel.NameKey)
	}
}

// otelKind is one primitive of TestInstrumentation_kinds: take makes one
// acquisition and returns how to release what it took (nil: nothing is
// held); gone are the keys whose deletion loses it.
type otelKind struct {
	kind lualock.Kind
	take func(ctx context.Context, c *lualock.Client, name string) (func() error, error)
	gone func(name string) []string
}

// lockHandle is a *lualock.Lock or a *lualock.FencedLock.
type lockHandle interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

func lockOf(kind lualock.Kind, l func(c *lualock.Client, name string) lockHandle) otelKind {
	return otelKind{kind: kind, gone: func(name string) []string { return []string{name} },
		take: func(ctx context.Context, c *lualock.Client, name string) (func() error, error) {
			h := l(c, name)
			return func() error { return h.Unlock(ctx) }, h.Lock(ctx)
		}}
}

// TestInstrumentation_kinds: every kind's acquisitions, and for what is
// held its hold time and its losses, are recorded under its own
// lualock.kind, read back through a ManualReader.
func TestInstrumentation_kinds(t *testing.T) {
	kinds := []otelKind{
		lockOf(lualock.KindReentrant, func(c *lualock.Client, n string) lockHandle { return c.NewLock(n) }),
		lockOf(lualock.KindFair, func(c *lualock.Client, n string) lockHandle { return c.NewFairLock(n) }),
		lockOf(lualock.KindRead, func(c *lualock.Client, n string) lockHandle { return c.NewReadWriteLock(n).ReadLock() }),
		lockOf(lualock.KindWrite, func(c *lualock.Client, n string) lockHandle { return c.NewReadWriteLock(n).WriteLock() }),
		lockOf(lualock.KindFenced, func(c *lualock.Client, n string) lockHandle { return c.NewFencedLock(n) }),
		lockOf(lualock.KindSpin, func(c *lualock.Client, n string) lockHandle { return c.NewSpinLock(n) }),
		{kind: lualock.KindSemaphore, take: func(ctx context.Context, c *lualock.Client, n string) (func() error, error) {
			s := c.NewSemaphore(n)
			if _, err := s.TrySetPermits(ctx, 1); err != nil {
				return nil, err
			}
			return nil, s.Acquire(ctx, 1)
		}},
		{kind: lualock.KindPermit, gone: func(n string) []string { return []string{n, "{" + n + "}:timeout"} },
			take: func(ctx context.Context, c *lualock.Client, n string) (func() error, error) {
				s := c.NewPermitExpirableSemaphore(n)
				if _, err := s.TrySetPermits(ctx, 1); err != nil {
					return nil, err
				}
				p, err := s.Acquire(ctx)
				if err != nil {
					return nil, err
				}
				return func() error { return p.Release(ctx) }, nil
			}},
		{kind: lualock.KindLatch, take: func(ctx context.Context, c *lualock.Client, n string) (func() error, error) {
			return nil, c.NewCountDownLatch(n).Await(ctx) // never set: open
		}},
		{kind: lualock.KindMultiLock, take: func(ctx context.Context, c *lualock.Client, n string) (func() error, error) {
			m := c.NewMultiLock(c.NewLock(n+"-1"), c.NewLock(n+"-2"))
			return func() error { return m.Unlock(ctx) }, m.Lock(ctx)
		}},
	}
	if len(kinds) != len(lualock.Kinds()) {
		t.Fatalf("the test covers %d kinds, lualock has %d", len(kinds), len(lualock.Kinds()))
	}
	for _, k := range kinds {
		t.Run(k.kind.String(), func(t *testing.T) {
			ctx := t.Context()
			mr, rdb, reader, mp := otelEnv(t)
			otl, err := lualockotel.New(lualockotel.WithMeterProvider(mp))
			if err != nil {
				t.Fatal(err)
			}
			c, err := lualock.New(rdb, lualock.Options{WatchdogLease: 1500 * time.Millisecond, Observer: otl.Observer()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			kind := lualockotel.KindKey.String(k.kind.String())
			name := "otel-" + k.kind.String()

			release, err := k.take(ctx, c, name)
			if err != nil {
				t.Fatal(err)
			}
			if release != nil {
				if err := release(); err != nil {
					t.Fatal(err)
				}
			}
			if k.gone != nil {
				if _, err := k.take(ctx, c, name); err != nil {
					t.Fatal(err)
				}
				for _, key := range k.gone(name) {
					mr.Del(key)
				}
				waitUntil(t, func() bool {
					return sum(t, collected(t, reader), "lualock.holds.lost", attrs(kind, lualockotel.ReasonKey.String("lost_gone"))) == 1
				})
			}

			data := collected(t, reader)
			acquired := int64(1)
			if k.gone != nil {
				acquired = 2
			}
			if got := sum(t, data, "lualock.acquisitions", attrs(kind, lualockotel.OutcomeKey.String("acquired"))); got != acquired {
				t.Errorf("lualock.acquisitions{%s, acquired} = %d, want %d", kind.Value.AsString(), got, acquired)
			}
			if k.gone == nil {
				return
			}
			if n, _ := hist(t, data, "lualock.hold.duration", attrs(kind, lualockotel.ReasonKey.String("released"))); n != 1 {
				t.Errorf("lualock.hold.duration{%s, released}: count %d, want 1", kind.Value.AsString(), n)
			}
		})
	}
}

// TestOutcomeOf: each error an acquisition returns has its outcome.
func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "acquired"},
		{lualock.ErrNotObtained, "not_obtained"},
		{lualock.ErrUnavailable, "unavailable"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "canceled"},
		{lualock.ErrLockLost, "lost"},
		{lualock.ErrClosed, "closed"},
		{lualock.ErrInvalid, "invalid"},
		{errors.New("ERR boom"), "error"},
	} {
		if got := lualockotel.OutcomeOf(tc.err).String(); got != tc.want {
			t.Errorf("OutcomeOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
