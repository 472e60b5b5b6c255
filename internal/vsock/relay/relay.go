package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// Defaults for zero Options fields.
const (
	// DefaultIdleTimeout closes connections with no payload in either
	// direction for 5 minutes: long enough for a quiet database session,
	// short enough that a guest cannot park connections for an hour.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultHalfCloseTimeout closes a connection whose one direction has
	// ended (EOF, half-closed) when the other has not ended 30 s later.
	DefaultHalfCloseTimeout = 30 * time.Second
	// DefaultDialTimeout bounds the connect to the target guest.
	DefaultDialTimeout = 5 * time.Second
	// DefaultMaxConns is the per-route connection limit when Route.MaxConns is 0.
	DefaultMaxConns = 1024
	// DefaultMaxTotalConns caps the relay's connections over all routes.
	DefaultMaxTotalConns = 4096
	// DefaultMaxConnsPerCID caps one source CID's connections over all
	// routes, so one guest cannot take the other guests' share.
	DefaultMaxConnsPerCID = 256
	// DefaultMaxConnsPerNamespace caps the connections of the routes of one
	// namespace's attachments, so one tenant cannot take the other tenants'
	// share of MaxTotalConns: a quarter of DefaultMaxTotalConns.
	DefaultMaxConnsPerNamespace = DefaultMaxTotalConns / 4
	// DefaultBufferSize is the copy buffer per direction of a busy
	// connection, in bytes: 64 KiB, the largest message size the VMCI paper
	// found best (4 KB-64 KB), and the unit of the relay benchmark's larger
	// message. It comes from a pool while data flows; an idle connection
	// holds only SmallBufferSize per direction.
	DefaultBufferSize = 64 << 10
	// SmallBufferSize is the read buffer of a quiet direction, bytes.
	SmallBufferSize = 2 << 10
	// DefaultBufferBudget caps the bytes of BufferSize buffers borrowed at
	// once over all connections when Options.BufferBudget is 0: 32 MiB, a
	// quarter of the chart's 128 MiB agent memory limit (BudgetsForMemory
	// derives it from the limit the agent is given).
	DefaultBufferBudget = 32 << 20
)

// ConnMemoryEstimate is what one relayed connection costs the agent beyond
// the buffer budget, bytes: its two SmallBufferSize buffers, its sockets'
// and pipe's Go state and four goroutine stacks (serve, two copies, the idle
// watch). 64 KiB is about twice what TestRelayFloodOnTheCopyPathStaysInBudget
// measures for the heap (~22 KiB per admitted connection, test-side sockets
// included) plus 4 of Go's 8 KiB starting stacks.
const ConnMemoryEstimate = 64 << 10

// Budgets are the relay limits that follow from the agent's memory limit.
type Budgets struct {
	// BufferBudget is Options.BufferBudget, bytes.
	BufferBudget int64
	// MaxTotalConns and MaxConnsPerNamespace are the Options fields.
	MaxTotalConns, MaxConnsPerNamespace int
}

// BudgetsForMemory derives the relay's limits from limit, the agent
// container's memory limit in bytes, so that a flood cannot take the agent
// past it: a quarter of it for lent buffers, half of it for connections at
// ConnMemoryEstimate each (at most DefaultMaxTotalConns, at least 64), a
// quarter of those per namespace; the last quarter is the agent's own (its
// controllers, informers, device plugin). limit <= 0 (unknown) gives the
// defaults.
func BudgetsForMemory(limit int64) Budgets {
	if limit <= 0 {
		return Budgets{BufferBudget: DefaultBufferBudget, MaxTotalConns: DefaultMaxTotalConns, MaxConnsPerNamespace: DefaultMaxConnsPerNamespace}
	}
	total := int(min(max(limit/2/ConnMemoryEstimate, 64), DefaultMaxTotalConns))
	return Budgets{
		BufferBudget:         min(limit/4, int64(2*total*DefaultBufferSize)),
		MaxTotalConns:        total,
		MaxConnsPerNamespace: max(total/4, 1),
	}
}

// lendQuiet is how long a direction holding a lent buffer waits for bytes
// before it gives the buffer back and waits on its small one (at least half
// of it, at most all of it: bufferCopy moves its deadline only every
// lendQuiet/2): far above the gaps of a busy stream, far below the idle
// timeout.
const lendQuiet = 100 * time.Millisecond

// The denial log lines: at most denyLogBurst at once and denyLogRate per
// second after that, so a guest dialling in a loop cannot fill the node's
// logs; the line written after a gap says how many were suppressed.
const (
	denyLogRate  rate.Limit = 1
	denyLogBurst int        = 10
)

// Options configure a Relay.
type Options struct {
	// Transport listens on the host CID and dials guests. Required.
	Transport vsock.Transport
	// Registerer receives the relay's metrics (see the Metric constants);
	// nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Logger receives the denial lines and errors; the zero Logger discards.
	Logger logr.Logger
	// IdleTimeout closes a connection after this long without payload in
	// either direction. 0 means DefaultIdleTimeout; negative disables it.
	IdleTimeout time.Duration
	// HalfCloseTimeout closes a connection this long after one direction
	// ended while the other has not. 0 means DefaultHalfCloseTimeout;
	// negative disables it.
	HalfCloseTimeout time.Duration
	// DialTimeout bounds the connect to the target. 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// DefaultMaxConns is the connection limit of routes with MaxConns 0.
	// 0 means DefaultMaxConns.
	DefaultMaxConns int
	// MaxTotalConns caps the connections over all routes. 0 means
	// DefaultMaxTotalConns.
	MaxTotalConns int
	// MaxConnsPerCID caps one source CID's connections over all routes. 0
	// means DefaultMaxConnsPerCID.
	MaxConnsPerCID int
	// MaxConnsPerNamespace caps the connections of the routes of one
	// namespace (Route.Attachment.Namespace) over all its routes. 0 means
	// DefaultMaxConnsPerNamespace.
	MaxConnsPerNamespace int
	// BufferSize is the copy buffer per direction of a busy connection in
	// bytes. 0 means DefaultBufferSize.
	BufferSize int
	// BufferBudget caps the bytes of BufferSize buffers lent to busy
	// directions at once, over all connections; a busy direction that finds
	// the budget spent keeps copying through its SmallBufferSize buffer
	// (slower, never blocked). 0 means DefaultBufferBudget; negative lends
	// none.
	BufferBudget int64
}

// Limits are the relay's effective limits, for the FastPathNode status.
// It is JSON round-trippable; the durations encode as integer nanoseconds.
type Limits struct {
	// MaxTotalConns, MaxConnsPerCID, MaxConnsPerNamespace and
	// DefaultMaxConns are the Options fields, connections.
	MaxTotalConns        int `json:"maxTotalConns"`
	MaxConnsPerCID       int `json:"maxConnsPerCID"`
	MaxConnsPerNamespace int `json:"maxConnsPerNamespace"`
	DefaultMaxConns      int `json:"defaultMaxConns"`
	// BufferBudget is the cap of borrowed copy buffers, bytes (0: none).
	BufferBudget int64 `json:"bufferBudget"`
	// IdleTimeout and HalfCloseTimeout are the Options fields (negative:
	// disabled), nanoseconds in JSON.
	IdleTimeout      time.Duration `json:"idleTimeout"`
	HalfCloseTimeout time.Duration `json:"halfCloseTimeout"`
}

// Relay forwards vsock connections from guests to sibling guests along
// routes. Create it with New, feed it the desired routes with Update (as
// often as they change) and stop it with Close. Its methods are safe for
// concurrent use.
type Relay struct {
	opts    Options
	log     logr.Logger
	metrics *metrics
	bufs    sync.Pool
	// lendable is how many BufferSize buffers may be lent at once
	// (BufferBudget / BufferSize); lent is how many are.
	lendable int64
	lent     atomic.Int64
	// denyLog limits the denial log lines; suppressed counts those dropped
	// since the last one written. MetricDenials counts every denial.
	denyLog    *rate.Limiter
	suppressed atomic.Int64
	// copyLoop copies a direction that cannot splice: (*pipe).bufferCopy;
	// the benchmark swaps in the loop it replaced, to compare them in one run.
	copyLoop func(p *pipe, dst, src net.Conn, moved func(int)) (rerr, werr error)
	// lendQuiet is the const lendQuiet; the copy loop's tests shorten or
	// lengthen it.
	lendQuiet time.Duration

	mu        sync.Mutex // serialises Update and Close; guards listeners and closed
	listeners map[uint32]*listener
	closed    bool

	countMu sync.Mutex // guards total, perCID and perNS, the relay-wide connection counts
	total   int
	perCID  map[uint32]int
	perNS   map[string]int
}

// Limits returns the relay's effective limits.
func (r *Relay) Limits() Limits {
	return Limits{MaxTotalConns: r.opts.MaxTotalConns, MaxConnsPerCID: r.opts.MaxConnsPerCID,
		MaxConnsPerNamespace: r.opts.MaxConnsPerNamespace, DefaultMaxConns: r.opts.DefaultMaxConns,
		BufferBudget: r.lendable * int64(r.opts.BufferSize),
		IdleTimeout:  r.opts.IdleTimeout, HalfCloseTimeout: r.opts.HalfCloseTimeout}
}

// reserve takes a relay-wide slot for a connection from cid on a route of
// namespace ns; it returns the denial reason when the global, per-namespace
// or per-CID cap is reached.
func (r *Relay) reserve(cid uint32, ns string) string {
	r.countMu.Lock()
	defer r.countMu.Unlock()
	switch {
	case r.total >= r.opts.MaxTotalConns:
		return ReasonGlobalLimit
	case r.perNS[ns] >= r.opts.MaxConnsPerNamespace:
		return ReasonNamespaceLimit
	case r.perCID[cid] >= r.opts.MaxConnsPerCID:
		return ReasonCIDLimit
	}
	r.total++
	r.perCID[cid]++
	r.perNS[ns]++
	return ""
}

// release returns the slot reserve took.
func (r *Relay) release(cid uint32, ns string) {
	r.countMu.Lock()
	defer r.countMu.Unlock()
	r.total--
	if r.perCID[cid]--; r.perCID[cid] <= 0 {
		delete(r.perCID, cid)
	}
	if r.perNS[ns]--; r.perNS[ns] <= 0 {
		delete(r.perNS, ns)
	}
}

// borrow lends a BufferSize buffer when the budget has one left, else
// returns nil; every buffer borrow returns goes back through giveBack.
func (r *Relay) borrow() *[]byte {
	for {
		n := r.lent.Load()
		if n >= r.lendable {
			return nil
		}
		if r.lent.CompareAndSwap(n, n+1) {
			r.metrics.lent.Add(float64(r.opts.BufferSize))
			return r.bufs.Get().(*[]byte)
		}
	}
}

// logDenial writes a denial line unless the rate limit holds it back; the
// next line written says how many were held back since the last one.
// err, when not nil, makes it an error line.
func (r *Relay) logDenial(log logr.Logger, err error, kv []any) {
	if !r.denyLog.Allow() {
		r.suppressed.Add(1)
		return
	}
	if n := r.suppressed.Swap(0); n > 0 {
		kv = append(kv, "suppressedDenialLines", n)
	}
	if err != nil {
		log.Error(err, "Denied vsock relay connection", kv...)
		return
	}
	log.Info("Denied vsock relay connection", kv...)
}

// giveBack returns a buffer borrow lent.
func (r *Relay) giveBack(b *[]byte) {
	r.bufs.Put(b)
	r.lent.Add(-1)
	r.metrics.lent.Sub(float64(r.opts.BufferSize))
}

// ListenerStatus describes one relay listener, for the FastPathNode status.
// It is JSON round-trippable (the vsock backend's /v1/relay answers carry it).
type ListenerStatus struct {
	// Port is the relay port on the host CID.
	Port uint32 `json:"port"`
	// Attachment is the FastPathAttachment (namespace/name) of the route.
	Attachment types.NamespacedName `json:"attachment"`
	// Service is the route's service name.
	Service string `json:"service"`
	// TargetCID and TargetPort are where new connections go.
	TargetCID  uint32 `json:"targetCID"`
	TargetPort uint32 `json:"targetPort"`
	// AllowedCIDs is the current allow-list.
	AllowedCIDs []uint32 `json:"allowedCIDs"`
	// ActiveConns is the number of open relayed connections.
	ActiveConns int `json:"activeConns"`
}

// New returns a relay with no routes. It fails when opts.Transport is nil or
// the metrics cannot be registered (e.g. a second relay on one registry).
func New(opts Options) (*Relay, error) {
	if opts.Transport == nil {
		return nil, errors.New("failed to create vsock relay: a transport is required")
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.HalfCloseTimeout == 0 {
		opts.HalfCloseTimeout = DefaultHalfCloseTimeout
	}
	if opts.MaxTotalConns <= 0 {
		opts.MaxTotalConns = DefaultMaxTotalConns
	}
	if opts.MaxConnsPerCID <= 0 {
		opts.MaxConnsPerCID = DefaultMaxConnsPerCID
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.DefaultMaxConns <= 0 {
		opts.DefaultMaxConns = DefaultMaxConns
	}
	if opts.MaxConnsPerNamespace <= 0 {
		opts.MaxConnsPerNamespace = DefaultMaxConnsPerNamespace
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = DefaultBufferSize
	}
	if opts.BufferBudget == 0 {
		opts.BufferBudget = DefaultBufferBudget
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	r := &Relay{
		opts:      opts,
		log:       opts.Logger,
		metrics:   m,
		listeners: map[uint32]*listener{},
		perCID:    map[uint32]int{},
		perNS:     map[string]int{},
		lendable:  max(opts.BufferBudget, 0) / int64(opts.BufferSize),
		denyLog:   rate.NewLimiter(denyLogRate, denyLogBurst),
		copyLoop:  (*pipe).bufferCopy,
		lendQuiet: lendQuiet,
	}
	r.bufs.New = func() any { b := make([]byte, opts.BufferSize); return &b }
	return r, nil
}

// Update makes the relay serve exactly routes (level-based; call it with the
// full desired set every time):
//   - a route whose (attachment, service, listen port) is new gets a listener;
//   - a route that is gone has its listener closed and its connections closed
//     (the attachment that authorised them no longer does);
//   - a route that stays takes its new target, allow-list and limit; its
//     established connections whose source CID is no longer allowed, or
//     that go to another target than the new one, are closed and counted
//     (MetricDenials, reason ReasonRevoked); the others are kept.
//
// Invalid routes (see Route.Validate) and routes reusing another route's
// listen port or (attachment, service) are skipped, as are routes whose
// listener cannot be opened; the rest is still applied and the returned
// error joins every problem, so a retry later converges.
func (r *Relay) Update(routes []Route) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("failed to update vsock relay routes: relay is closed")
	}

	var errs []error
	desired := map[uint32]Route{}
	byService := map[routeKey]bool{}
	for _, rt := range routes {
		if err := rt.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		svc := routeKey{attachment: rt.Attachment, service: rt.Service}
		if prev, dup := desired[rt.ListenPort]; dup {
			errs = append(errs, fmt.Errorf("failed to add relay route %s: listen port %d is already used by %s", rt, rt.ListenPort, prev))
			continue
		}
		if byService[svc] {
			errs = append(errs, fmt.Errorf("failed to add relay route %s: service %s/%s already has a route", rt, rt.Attachment, rt.Service))
			continue
		}
		desired[rt.ListenPort] = rt
		byService[svc] = true
	}

	// Removals first, so that a route moving between ports frees its
	// metric series before the new listener creates them.
	for port, l := range r.listeners {
		if d, ok := desired[port]; !ok || d.key() != l.key {
			l.stop()
			delete(r.listeners, port)
			r.log.Info("Removed vsock relay route", "listenPort", port, "attachment", klog.KRef(l.key.attachment.Namespace, l.key.attachment.Name), "service", l.key.service)
		}
	}
	for port, rt := range desired {
		cfg := newConfig(rt, r.opts.DefaultMaxConns)
		if l, ok := r.listeners[port]; ok {
			l.cfg.Store(cfg)
			l.revoke(cfg)
			continue
		}
		l, err := r.startListener(cfg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.listeners[port] = l
		r.log.Info("Added vsock relay route", "listenPort", port, "attachment", klog.KRef(rt.Attachment.Namespace, rt.Attachment.Name), "service", rt.Service,
			"targetCID", rt.TargetCID, "targetPort", rt.TargetPort)
	}
	return errors.Join(errs...)
}

// Listeners returns the open listeners sorted by port.
func (r *Relay) Listeners() []ListenerStatus {
	r.mu.Lock()
	ls := make([]*listener, 0, len(r.listeners))
	for _, l := range r.listeners {
		ls = append(ls, l)
	}
	r.mu.Unlock()

	out := make([]ListenerStatus, 0, len(ls))
	for _, l := range ls {
		cfg := l.cfg.Load()
		l.mu.Lock()
		active := l.active
		l.mu.Unlock()
		out = append(out, ListenerStatus{
			Port:        cfg.route.ListenPort,
			Attachment:  cfg.route.Attachment,
			Service:     cfg.route.Service,
			TargetCID:   cfg.route.TargetCID,
			TargetPort:  cfg.route.TargetPort,
			AllowedCIDs: slices.Clone(cfg.route.AllowedCIDs),
			ActiveConns: active,
		})
	}
	slices.SortFunc(out, func(a, b ListenerStatus) int { return cmp.Compare(a.Port, b.Port) })
	return out
}

// Close closes every listener and connection and waits for them. Update
// fails afterwards. Close is idempotent.
func (r *Relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for port, l := range r.listeners {
		l.stop()
		delete(r.listeners, port)
	}
	return nil
}

func (r *Relay) startListener(cfg *config) (*listener, error) {
	ln, err := r.opts.Transport.Listen(cfg.route.ListenPort)
	if err != nil {
		return nil, fmt.Errorf("failed to open listener of relay route %s: %w", cfg.route, err)
	}
	k := cfg.route.key()
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{
		relay:      r,
		key:        k,
		ln:         ln,
		ctx:        ctx,
		cancel:     cancel,
		acceptDone: make(chan struct{}),
		conns:      map[*pipe]struct{}{},
		m:          r.metrics.forRoute(k),
		log: r.log.WithValues("listenPort", k.port,
			"attachment", klog.KRef(k.attachment.Namespace, k.attachment.Name), "service", k.service),
	}
	l.cfg.Store(cfg)
	go l.acceptLoop()
	return l, nil
}

// acceptBackoff is the pause after an Accept error that is not the
// listener's close, so a persistent error (e.g. EMFILE) does not spin.
const acceptBackoff = 50 * time.Millisecond

// clockStart anchors monotonicNanos, the idle timer's clock: time.Since
// reads the monotonic clock, so wall-clock steps do not close connections.
var clockStart = time.Now()

func monotonicNanos() int64 { return int64(time.Since(clockStart)) }

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
