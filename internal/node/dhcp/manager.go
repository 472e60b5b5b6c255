package dhcp

import (
	"context"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Manager runs one Responder per bridge it is told to serve, for the node
// agent: Sync starts the missing ones and stops the others. The zero value
// is not usable; call NewManager.
type Manager struct {
	ctx       context.Context
	leases    *Table
	serverID  netip.Addr
	leaseTime time.Duration
	log       logr.Logger

	mu      sync.Mutex
	running map[string]*running
	wg      sync.WaitGroup
}

// running is one started Responder.
type running struct {
	r      *Responder
	cancel context.CancelFunc
	done   chan struct{}
	err    error // why it stopped on its own; read after done
}

// NewManager returns a manager whose responders answer from leases (with
// serverID and leaseTime: see Config) until ctx is done.
func NewManager(ctx context.Context, leases *Table, serverID netip.Addr, leaseTime time.Duration, log logr.Logger) *Manager {
	return &Manager{ctx: ctx, leases: leases, serverID: serverID, leaseTime: leaseTime, log: log, running: map[string]*running{}}
}

// Sync makes exactly the responders of bridges run: it starts those not
// running (and those that stopped on a failure, whose error it returns
// when they cannot start again) and stops the others. It returns an error
// per bridge whose responder does not run.
func (m *Manager) Sync(bridges []string) map[string]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[string]bool{}
	for _, b := range bridges {
		want[b] = true
	}
	for b, run := range m.running {
		select {
		case <-run.done: // stopped on its own: start it again below
			if run.err != nil {
				m.log.Error(run.err, "DHCP responder stopped; restarting it", "bridge", b)
			}
			delete(m.running, b)
			continue
		default:
		}
		if !want[b] {
			run.cancel()
			<-run.done
			delete(m.running, b)
			m.log.Info("Stopped answering DHCPv4", "bridge", b)
		}
	}
	errs := map[string]error{}
	sorted := make([]string, 0, len(want))
	for b := range want {
		sorted = append(sorted, b)
	}
	sort.Strings(sorted)
	for _, b := range sorted {
		if m.running[b] != nil {
			continue
		}
		r := New(Config{Bridge: b, Leases: m.leases, ServerID: m.serverID, LeaseTime: m.leaseTime, Log: m.log})
		srv, err := r.listen()
		if err != nil {
			errs[b] = err
			continue
		}
		ctx, cancel := context.WithCancel(m.ctx)
		run := &running{r: r, cancel: cancel, done: make(chan struct{})}
		m.running[b] = run
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer close(run.done)
			run.err = r.serve(ctx, srv)
		}()
	}
	return errs
}

// Responder returns the running responder of bridge, nil when none runs.
func (m *Manager) Responder(bridge string) *Responder {
	m.mu.Lock()
	defer m.mu.Unlock()
	if run := m.running[bridge]; run != nil {
		return run.r
	}
	return nil
}

// Stop stops every responder and waits for them.
func (m *Manager) Stop() {
	m.mu.Lock()
	for b, run := range m.running {
		run.cancel()
		delete(m.running, b)
	}
	m.mu.Unlock()
	m.wg.Wait()
}
