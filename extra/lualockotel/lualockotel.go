// Package lualockotel records lualock's metrics and traces with
// OpenTelemetry. It is a module of its own, so that the lualock module
// itself depends on no OpenTelemetry package.
//
// Wire it in two steps: the Observer goes into lualock.Options before the
// client exists, the gauges of Client.Stats are registered once it does.
//
//	otl, err := lualockotel.New(lualockotel.WithMeterProvider(mp))
//	...
//	client, err := lualock.New(rdb, lualock.Options{Observer: otl.Observer()})
//	...
//	reg, err := otl.RegisterStats(client) // reg.Unregister() before client.Close()
//
// Metrics (the lock name is never an attribute: it would make one series per
// lock; it is a span attribute):
//
//	lualock.acquisitions        counter    {acquisition}  kind, outcome
//	lualock.acquire.duration    histogram  s              kind, outcome (the wait)
//	lualock.handoffs            counter    {handoff}      kind
//	lualock.hold.duration       histogram  s              kind, reason
//	lualock.holds.lost          counter    {hold}         kind, reason
//	lualock.renewals            counter    {hold}         outcome (ok, error)
//	lualock.renewal.calls       counter    {call}         outcome (ok, error)
//	lualock.watched             gauge      {hold}         client
//	lualock.waiters             gauge      {waiter}       client
//	lualock.subscriptions       gauge      {channel}      client
//	lualock.pubsub.connections  gauge      {connection}   client
//
// The attribute keys are lualock.kind (lualock.Kind's String: reentrant,
// fair, read, write, fenced, spin, semaphore, permit, latch, multilock),
// lualock.outcome
// (see Outcome), lualock.reason (lualock.EndReason's String) and
// lualock.client (Client.ID). Each acquisition is also a span,
// "lualock.acquire", from the call's start to its return, a child of the
// span in the call's context.
package lualockotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lualock/lualock"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/lualock/lualock/extra/lualockotel"

// Attribute keys.
const (
	KindKey    = attribute.Key("lualock.kind")
	OutcomeKey = attribute.Key("lualock.outcome")
	ReasonKey  = attribute.Key("lualock.reason")
	ClientKey  = attribute.Key("lualock.client")
	NameKey    = attribute.Key("lualock.name") // span attribute only: the object's name
)

// Option configures New.
type Option func(*config)

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets the meter provider. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets the tracer provider. Default:
// otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// Instrumentation holds the instruments. One may serve several clients.
type Instrumentation struct {
	meter  metric.Meter
	tracer trace.Tracer

	acquisitions metric.Int64Counter
	acquireDur   metric.Float64Histogram
	handoffs     metric.Int64Counter
	holdDur      metric.Float64Histogram
	holdsLost    metric.Int64Counter
	renewals     metric.Int64Counter
	renewCalls   metric.Int64Counter

	watched, waiters, subscriptions, conns metric.Int64ObservableGauge

	// Attribute sets, made once per kind so that recording allocates
	// nothing; indexed by lualock.Kind (0 stands for a kind this module
	// does not know, labelled "unknown").
	byKindOutcome [numKinds][numOutcomes]metric.MeasurementOption
	byKind        [numKinds]metric.MeasurementOption
	byKindReason  [numKinds][numReasons]metric.MeasurementOption
	renewOK       metric.MeasurementOption
	renewErr      metric.MeasurementOption
}

// Outcome is the lualock.outcome of an acquisition.
type Outcome uint8

// The outcomes of an acquisition, by the error it returned.
const (
	Acquired    Outcome = iota // nil
	NotObtained                // lualock.ErrNotObtained: the wait ran out
	Unavailable                // lualock.ErrUnavailable: Redis did not answer
	Canceled                   // the context ended
	Lost                       // lualock.ErrLockLost: a re-entry into a lost hold
	Closed                     // lualock.ErrClosed
	Invalid                    // lualock.ErrInvalid
	Failed                     // another error (a Redis error)
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"acquired", "not_obtained", "unavailable", "canceled", "lost", "closed", "invalid", "error"}

// String returns the outcome as the attribute value.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "error"
}

// OutcomeOf classifies an acquisition's error.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return Acquired
	case errors.Is(err, lualock.ErrNotObtained):
		return NotObtained
	case errors.Is(err, lualock.ErrUnavailable):
		return Unavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Canceled
	case errors.Is(err, lualock.ErrLockLost):
		return Lost
	case errors.Is(err, lualock.ErrClosed):
		return Closed
	case errors.Is(err, lualock.ErrInvalid):
		return Invalid
	}
	return Failed
}

const numReasons = int(lualock.LostOther) + 1

// numKinds bounds the kinds with attribute sets made in advance.
const numKinds = 16

// kindOf is k's index in the attribute sets: 0 for a kind out of range.
func kindOf(k lualock.Kind) int {
	if int(k) < numKinds {
		return int(k)
	}
	return 0
}

// New creates the instruments.
func New(opts ...Option) (*Instrumentation, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	in := &Instrumentation{meter: c.mp.Meter(ScopeName), tracer: c.tp.Tracer(ScopeName)}
	m := in.meter
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	in.acquisitions, err = m.Int64Counter("lualock.acquisitions", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquisition calls that returned (a lock's Lock and TryLock, a semaphore's Acquire and TryAcquire, a latch's Await, ...), by kind and outcome."))
	add(err)
	in.acquireDur, err = m.Float64Histogram("lualock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from an acquisition call's start to its return: the wait."))
	add(err)
	in.handoffs, err = m.Int64Counter("lualock.handoffs", metric.WithUnit("{handoff}"),
		metric.WithDescription("Acquisitions that obtained the lock after waiting for another holder."))
	add(err)
	in.holdDur, err = m.Float64Histogram("lualock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a lock handle held a lock (from the first hold's acquisition to the end of the last) or a permit was held."))
	add(err)
	in.holdsLost, err = m.Int64Counter("lualock.holds.lost", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds and permits lost before their release, by kind and reason."))
	add(err)
	in.renewals, err = m.Int64Counter("lualock.renewals", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds the watchdog renewed (outcome ok) or failed to renew (outcome error)."))
	add(err)
	in.renewCalls, err = m.Int64Counter("lualock.renewal.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Renewal calls of the watchdog, each for up to RenewBatch holds."))
	add(err)
	in.watched, err = m.Int64ObservableGauge("lualock.watched", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds the client's watchdog renews now."))
	add(err)
	in.waiters, err = m.Int64ObservableGauge("lualock.waiters", metric.WithUnit("{waiter}"),
		metric.WithDescription("Goroutines of the client waiting for a release message now."))
	add(err)
	in.subscriptions, err = m.Int64ObservableGauge("lualock.subscriptions", metric.WithUnit("{channel}"),
		metric.WithDescription("Release channels the client is subscribed to now."))
	add(err)
	in.conns, err = m.Int64ObservableGauge("lualock.pubsub.connections", metric.WithUnit("{connection}"),
		metric.WithDescription("Pub/sub connections the client has open now."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for k := range numKinds {
		kind := KindKey.String(lualock.Kind(k).String())
		in.byKind[k] = metric.WithAttributeSet(attribute.NewSet(kind))
		for o := range numOutcomes {
			in.byKindOutcome[k][o] = metric.WithAttributeSet(attribute.NewSet(kind, OutcomeKey.String(o.String())))
		}
		for r := range numReasons {
			in.byKindReason[k][r] = metric.WithAttributeSet(attribute.NewSet(kind, ReasonKey.String(lualock.EndReason(r).String())))
		}
	}
	in.renewOK = metric.WithAttributeSet(attribute.NewSet(OutcomeKey.String("ok")))
	in.renewErr = metric.WithAttributeSet(attribute.NewSet(OutcomeKey.String("error")))
	return in, nil
}

// Observer returns the hooks to set as lualock.Options.Observer.
func (in *Instrumentation) Observer() lualock.Observer {
	return lualock.Observer{Acquire: in.acquire, HoldEnd: in.holdEnd, Renew: in.renew}
}

func (in *Instrumentation) acquire(ev lualock.AcquireEvent) {
	ctx := ev.Context
	if ctx == nil {
		ctx = context.Background()
	}
	k, o := kindOf(ev.Kind), OutcomeOf(ev.Err)
	// The call's context may be over (a give-up, a cancellation): record
	// under one that is not, keeping its values (the parent span).
	rctx := context.WithoutCancel(ctx)
	in.acquisitions.Add(rctx, 1, in.byKindOutcome[k][o])
	in.acquireDur.Record(rctx, ev.Wait.Seconds(), in.byKindOutcome[k][o])
	if ev.Handoff {
		in.handoffs.Add(rctx, 1, in.byKind[k])
	}
	_, span := in.tracer.Start(rctx, "lualock.acquire",
		trace.WithTimestamp(ev.Start), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(NameKey.String(ev.Name), KindKey.String(lualock.Kind(k).String()), OutcomeKey.String(o.String()),
			attribute.Bool("lualock.handoff", ev.Handoff)))
	if o != Acquired && o != NotObtained {
		span.SetStatus(codes.Error, ev.Err.Error())
	}
	span.End(trace.WithTimestamp(ev.Start.Add(ev.Wait)))
}

func (in *Instrumentation) holdEnd(ev lualock.HoldEndEvent) {
	k, r := kindOf(ev.Kind), int(ev.Reason)
	if r >= numReasons {
		r = int(lualock.LostOther)
	}
	ctx := context.Background()
	in.holdDur.Record(ctx, ev.Held.Seconds(), in.byKindReason[k][r])
	if ev.Reason.Lost() {
		in.holdsLost.Add(ctx, 1, in.byKindReason[k][r])
	}
}

func (in *Instrumentation) renew(ev lualock.RenewEvent) {
	ctx := context.Background()
	opt := in.renewOK
	if ev.Err != nil {
		opt = in.renewErr
	}
	in.renewals.Add(ctx, int64(ev.Holds), opt)
	in.renewCalls.Add(ctx, 1, opt)
}

// RegisterStats registers the gauges of c.Stats(), read at each collection
// and labelled with c.ID(). Unregister the returned registration when the
// client is closed.
func (in *Instrumentation) RegisterStats(c *lualock.Client) (metric.Registration, error) {
	attrs := metric.WithAttributeSet(attribute.NewSet(ClientKey.String(c.ID())))
	return in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(in.watched, int64(s.Watched), attrs)
		o.ObserveInt64(in.waiters, int64(s.Waiters), attrs)
		o.ObserveInt64(in.subscriptions, int64(s.Subscriptions), attrs)
		o.ObserveInt64(in.conns, int64(s.PubSubConns), attrs)
		return nil
	}, in.watched, in.waiters, in.subscriptions, in.conns)
}
