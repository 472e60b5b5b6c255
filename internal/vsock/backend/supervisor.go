package backend

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of a Supervisor.
const (
	// DefaultProcNetUnix lists the node's UNIX sockets (connected-peer check).
	DefaultProcNetUnix = "/proc/net/unix"
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait before a process
	// that exited is started again (doubling from min to max).
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// socketWait is how long a started process has to create its sockets.
	socketWait = 10 * time.Second
)

// Status is one group's process as the Supervisor sees it.
type Status struct {
	// Key of the group.
	Key string `json:"key"`
	// Running: the process is up and every VM socket of Serving exists.
	Running bool `json:"running"`
	// PID of the process, 0 when none runs (in the Supervisor's PID
	// namespace).
	PID int `json:"pid"`
	// Started is when the process started (RFC 3339 in JSON); zero when
	// none runs. A QEMU that connected before it is not connected to it:
	// QEMU does not reconnect a vhost-user-vsock device.
	Started time.Time `json:"started,omitzero"`
	// Restarts counts the restarts after the process exited by itself.
	Restarts int32 `json:"restarts"`
	// Serving are the VMs the process serves (in CID order).
	Serving []VM `json:"serving,omitempty"`
	// Pending: the wanted VMs differ from Serving (or the group is no longer
	// wanted) and the process is kept until no QEMU is connected to it.
	Pending bool `json:"pending,omitempty"`
	// Message says why the process is not running or what is pending.
	Message string `json:"message,omitempty"`
}

// Supervisor runs one vhost-device-vsock per Group and restarts it when it
// exits. Binary is required; the rest have defaults. Its methods are safe
// for concurrent use.
type Supervisor struct {
	// Binary is the path of vhost-device-vsock.
	Binary string
	// LogDir, when set, receives one "<group name>.log" per group (stdout and
	// stderr); otherwise the output is discarded.
	LogDir string
	// ProcNetUnix overrides DefaultProcNetUnix (tests).
	ProcNetUnix string
	// MinBackoff and MaxBackoff override the defaults when positive.
	MinBackoff, MaxBackoff time.Duration
	// OnChange, when set, is called (on its own goroutine) after a process
	// started, exited or was replaced, so the caller can publish the status.
	OnChange func()
	// Credential, when set, is the user and group every process runs as,
	// with no supplementary groups. A process that is not user 0 keeps no
	// capability across execve (capabilities(7): without file capabilities
	// its permitted and effective sets are cleared), so the guest-facing
	// backend holds neither the caller's UID 0 nor its capabilities (the
	// agent's NET_ADMIN and NET_RAW). Starting it needs CAP_SETUID and
	// CAP_SETGID in the caller; the caller gives that user write access to
	// the sockets' directories.
	Credential *syscall.Credential

	mu     sync.Mutex
	groups map[string]*supervised
}

// supervised is one group's supervision loop.
type supervised struct {
	serving Group // what the process serves (Args(serving))
	want    *Group
	pending string
	stop    chan struct{}
	done    chan struct{}

	// Guarded by Supervisor.mu.
	pid      int
	started  time.Time
	ready    bool
	restarts int32
	lastErr  string
}

// Sync makes the Supervisor serve groups: it starts a process for each new
// group, replaces the process of a group whose VMs changed and stops the
// process of a group that is gone — the last two only when no QEMU is
// connected to any socket of the running process (a restart would drop
// every open connection of the group); until then Status reports the group
// Pending. Errors: an invalid group (nothing is changed for it) or
// /proc/net/unix unreadable; the other groups are still synced.
func (s *Supervisor) Sync(groups []Group) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == nil {
		s.groups = map[string]*supervised{}
	}
	var errs []string
	wanted := map[string]bool{}
	for _, g := range groups {
		if err := g.Validate(); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		wanted[g.Key] = true
		cur, ok := s.groups[g.Key]
		if !ok {
			s.groups[g.Key] = s.start(g, 0)
			continue
		}
		if slices.Equal(Args(cur.serving), Args(g)) {
			cur.want, cur.pending = nil, ""
			continue
		}
		if err := s.replaceWhenIdle(cur, &g); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for key, cur := range s.groups {
		if wanted[key] {
			continue
		}
		if err := s.replaceWhenIdle(cur, nil); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to sync vhost-device-vsock groups: %s", strings.Join(errs, "; "))
	}
	return nil
}

// replaceWhenIdle replaces cur's process with one for next (nil: stops it)
// when no QEMU is connected to it, else marks it pending. Called with s.mu held.
func (s *Supervisor) replaceWhenIdle(cur *supervised, next *Group) error {
	n, err := connectedSockets(s.procNetUnix(), sockets(cur.serving))
	if err != nil {
		return err
	}
	if cur.pid != 0 && cur.ready {
		n = max(n, acceptedSockets(cur.serving))
	}
	if n > 0 {
		cur.want = next
		what := "stop (the group is no longer wanted)"
		if next != nil {
			what = "restart with VMs " + vmNames(next.VMs)
		}
		cur.pending = fmt.Sprintf("%s deferred: %d VMs are connected and a restart would drop their open connections; it happens once they stop", what, n)
		return nil
	}
	s.halt(cur)
	delete(s.groups, cur.serving.Key)
	if next != nil {
		s.groups[next.Key] = s.start(*next, cur.restarts)
	}
	return nil
}

// Status returns every group's state, in key order.
func (s *Supervisor) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.groups))
	for key, g := range s.groups {
		st := Status{Key: key, PID: g.pid, Started: g.started, Running: g.pid != 0 && g.ready, Restarts: g.restarts, Serving: sortedVMs(g.serving.VMs)}
		switch {
		case g.pending != "":
			st.Pending, st.Message = true, g.pending
		case !st.Running:
			st.Message = g.lastErr
			if st.Message == "" {
				st.Message = "starting"
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Stop stops every process (stopProcess: SIGTERM, so that each resets its
// guests' connections, then SIGKILL after StopGrace) and waits for the
// supervision loops to end. The groups stop at once, so Stop takes at most
// StopTimeout however many there are.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	halting := make([]*supervised, 0, len(s.groups))
	for key, g := range s.groups {
		halting = append(halting, g)
		delete(s.groups, key)
	}
	s.halt(halting...)
}

// halt ends the loops of gs (each stops its process) and waits for them.
// Called with s.mu held; a loop takes s.mu only briefly and never while
// waiting on stop, so it is released here for the wait.
func (s *Supervisor) halt(gs ...*supervised) {
	for _, g := range gs {
		close(g.stop)
	}
	s.mu.Unlock()
	for _, g := range gs {
		<-g.done
	}
	s.mu.Lock()
	for _, g := range gs {
		for _, vm := range g.serving.VMs {
			_ = os.Remove(vm.Socket)
			_ = os.Remove(vm.UDSPath)
		}
	}
}

// start launches the supervision loop of g. Called with s.mu held.
func (s *Supervisor) start(g Group, restarts int32) *supervised {
	sv := &supervised{serving: g, stop: make(chan struct{}), done: make(chan struct{}), restarts: restarts}
	go s.loop(sv)
	return sv
}

// loop runs sv's process until sv.stop closes, starting it again with a
// doubling back-off whenever it exits.
func (s *Supervisor) loop(sv *supervised) {
	defer close(sv.done)
	backoff := s.minBackoff()
	for first := true; ; first = false {
		if !first {
			select {
			case <-sv.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, s.maxBackoff())
		}
		cmd, exited, err := s.spawn(sv.serving)
		if err != nil {
			s.record(sv, func() { sv.lastErr = err.Error() })
			continue
		}
		s.record(sv, func() { sv.pid, sv.started, sv.ready, sv.lastErr = cmd.Process.Pid, time.Now(), false, "" })
		if !first {
			s.record(sv, func() { sv.restarts++ })
		}
		if err := waitSockets(sv.serving, exited); err == nil {
			s.record(sv, func() { sv.ready = true })
			backoff = s.minBackoff()
		} else {
			s.record(sv, func() { sv.lastErr = err.Error() })
		}
		select {
		case <-sv.stop:
			_ = stopProcess(cmd, exited)
			s.record(sv, func() { sv.pid, sv.started, sv.ready = 0, time.Time{}, false })
			return
		case <-exited:
			state := cmd.ProcessState
			s.record(sv, func() {
				sv.pid, sv.started, sv.ready = 0, time.Time{}, false
				sv.lastErr = fmt.Sprintf("vhost-device-vsock exited (%v); restarting", state)
			})
		}
	}
}

// record applies f under the lock and signals OnChange.
func (s *Supervisor) record(_ *supervised, f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
	if s.OnChange != nil {
		go s.OnChange()
	}
}

// spawn starts one vhost-device-vsock for g in its own process group, with
// stale sockets removed and their directories created.
func (s *Supervisor) spawn(g Group) (*exec.Cmd, chan struct{}, error) {
	for _, vm := range g.VMs {
		for _, p := range []string{vm.Socket, vm.UDSPath} {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, nil, fmt.Errorf("failed to create socket directory %s: %w", filepath.Dir(p), err)
			}
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return nil, nil, fmt.Errorf("failed to remove stale socket %s: %w", p, err)
			}
		}
	}
	cmd := exec.Command(s.Binary, Args(g)...)
	cmd.Env = append(os.Environ(), "RUST_LOG=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c := s.Credential; c != nil {
		// Groups empty (not nil): setgroups(0), so no group of the caller's
		// stays with the process.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: c.Uid, Gid: c.Gid, Groups: []uint32{}}
	}
	if s.LogDir != "" {
		f, err := os.OpenFile(filepath.Join(s.LogDir, g.Name()+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to open the log of group %s: %w", g.Key, err)
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("failed to start %s for group %s: %w", s.Binary, g.Key, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return cmd, exited, nil
}

// waitSockets waits up to socketWait for every vhost-user socket of g.
func waitSockets(g Group, exited chan struct{}) error {
	deadline := time.Now().Add(socketWait)
	for {
		missing := ""
		for _, vm := range g.VMs {
			if _, err := os.Stat(vm.Socket); err != nil {
				missing = vm.Socket
				break
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vhost-device-vsock for group %s did not create %s within %v", g.Key, missing, socketWait)
		}
		select {
		case <-exited:
			return fmt.Errorf("vhost-device-vsock for group %s exited before creating %s", g.Key, missing)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Supervisor) procNetUnix() string {
	if s.ProcNetUnix != "" {
		return s.ProcNetUnix
	}
	return DefaultProcNetUnix
}

func (s *Supervisor) minBackoff() time.Duration {
	if s.MinBackoff > 0 {
		return s.MinBackoff
	}
	return DefaultMinBackoff
}

func (s *Supervisor) maxBackoff() time.Duration {
	if s.MaxBackoff > 0 {
		return s.MaxBackoff
	}
	return DefaultMaxBackoff
}

func sockets(g Group) []string {
	out := make([]string, len(g.VMs))
	for i, vm := range g.VMs {
		out[i] = vm.Socket
	}
	return out
}

func sortedVMs(vms []VM) []VM {
	out := slices.Clone(vms)
	slices.SortFunc(out, func(a, b VM) int { return int(a.CID) - int(b.CID) })
	return out
}

func vmNames(vms []VM) string {
	names := make([]string, len(vms))
	for i, vm := range sortedVMs(vms) {
		names[i] = vm.Name + "=" + itoa(vm.CID)
	}
	return strings.Join(names, ",")
}
