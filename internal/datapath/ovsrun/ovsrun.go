package ovsrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Paths of Debian's openvswitch-switch package, and the lock.
const (
	// LockPath is the flock(2) target that serialises every user of OVS on
	// the machine (test binaries and the local node benchmark). Changing it
	// lets them start and stop OVS under each other.
	LockPath = "/run/fastpath-ovstest.lock"
	// OVSCtl is the init script helper that starts and stops ovsdb-server
	// and ovs-vswitchd.
	OVSCtl = "/usr/share/openvswitch/scripts/ovs-ctl"
	// SocketPath is where ovsdb-server listens.
	SocketPath = "/var/run/openvswitch/db.sock"
	// Socket is SocketPath as an OVSDB endpoint.
	Socket = "unix:" + SocketPath
	// VswitchdPidFile is where ovs-ctl records ovs-vswitchd's pid.
	VswitchdPidFile = "/var/run/openvswitch/ovs-vswitchd.pid"
)

// CmdTimeout bounds each ovs-ctl, ovs-appctl and ovs-vsctl call.
const CmdTimeout = 60 * time.Second

// lockPoll is how often Start retries a lock another process holds.
const lockPoll = 200 * time.Millisecond

// ErrNotInstalled is wrapped by Start when OVS must be started and OVSCtl is
// missing.
var ErrNotInstalled = errors.New("open vswitch is not installed (install openvswitch-switch)")

// Session is one holder's use of Open vSwitch: the lock on LockPath and what
// Start started. It is not safe for concurrent use; share one Session per
// process (as testutil.StartOVS does) or take one per run (as localbench does).
type Session struct {
	lock            *os.File
	startedDB       bool
	startedVswitchd bool
	tso             bool
}

// Start waits for the exclusive lock on LockPath (logging once to log while
// another process holds it; ctx ends the wait) and makes sure ovsdb-server
// and ovs-vswitchd run. When both already run they are used as they are,
// and UserspaceTSO tells whether they have userspace TSO. Otherwise Start
// runs `ovs-ctl start --system-id=random --no-ovs-vswitchd` unless the
// socket already answers, sets other_config:userspace-tso-enable=true
// (ovs-vswitchd reads it only when it starts), and then runs
// `ovs-ctl start --system-id=random --no-ovsdb-server`.
//
// Errors: the lock file cannot be opened or locked (ctx.Err() wrapped when
// ctx ended the wait), ErrNotInstalled wrapped when OVS must be started and
// OVSCtl is missing, or an ovs-ctl/ovs-vsctl failure with its output. On an
// error Start has stopped what it started and released the lock. On success
// call Stop when done.
func Start(ctx context.Context, log logr.Logger) (*Session, error) {
	f, err := lock(ctx, log)
	if err != nil {
		return nil, err
	}
	s := &Session{lock: f}
	if Answers() && VswitchdRuns() {
		out, err := Vsctl("get", "Open_vSwitch", ".", "other_config:userspace-tso-enable")
		s.tso = err == nil && strings.Trim(out, "\"\n") == "true"
		log.Info("Using the Open vSwitch that is already running", "userspaceTSO", s.tso)
		return s, nil
	}
	if _, err := os.Stat(OVSCtl); err != nil {
		s.unlock()
		return nil, fmt.Errorf("failed to start Open vSwitch: %w: %v", ErrNotInstalled, err)
	}
	fail := func(err error) (*Session, error) {
		// Stop's own error adds nothing the caller can act on beyond err.
		_ = s.Stop()
		return nil, err
	}
	log.Info("Starting Open vSwitch with userspace TSO", "ovsCtl", OVSCtl)
	if !Answers() {
		s.startedDB = true
		if out, err := run(OVSCtl, "start", "--system-id=random", "--no-ovs-vswitchd"); err != nil {
			return fail(fmt.Errorf("failed to start ovsdb-server (ovs-ctl start --no-ovs-vswitchd): %w: %s", err, out))
		}
	}
	if out, err := Vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true"); err != nil {
		return fail(fmt.Errorf("failed to enable userspace TSO: %w: %s", err, out))
	}
	s.startedVswitchd = true
	if out, err := run(OVSCtl, "start", "--system-id=random", "--no-ovsdb-server"); err != nil {
		return fail(fmt.Errorf("failed to start ovs-vswitchd (ovs-ctl start --no-ovsdb-server): %w: %s", err, out))
	}
	if !Answers() || !VswitchdRuns() {
		return fail(fmt.Errorf("failed to start Open vSwitch: ovs-ctl returned but %s does not answer or ovs-vswitchd is not running", SocketPath))
	}
	s.tso = true
	return s, nil
}

// lock opens LockPath and takes an exclusive flock on it, polling every
// lockPoll so that ctx can end the wait.
func lock(ctx context.Context, log logr.Logger) (*os.File, error) {
	f, err := os.OpenFile(LockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to open %s: %w", LockPath, err)
	}
	logged := false
	err = wait.PollUntilContextCancel(ctx, lockPoll, true, func(context.Context) (bool, error) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return false, err
		}
		if !logged {
			log.Info("Waiting for the Open vSwitch lock (another test or benchmark uses OVS)", "lock", LockPath)
			logged = true
		}
		return false, nil
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("failed to lock %s: %w", LockPath, err)
	}
	return f, nil
}

// Started reports whether Start started ovs-vswitchd (and maybe
// ovsdb-server), which Stop will stop.
func (s *Session) Started() bool { return s.startedDB || s.startedVswitchd }

// UserspaceTSO reports whether the running ovs-vswitchd has
// other_config:userspace-tso-enable=true; always true when Start started it.
func (s *Session) UserspaceTSO() bool { return s.tso }

// Stop stops what Start started, both daemons with `ovs-ctl stop`, or only
// ovs-vswitchd (`ovs-appctl -t ovs-vswitchd exit`) when ovsdb-server was
// already running, and releases the lock. It is idempotent. The error
// carries the failed command's output; the lock is released regardless.
func (s *Session) Stop() error {
	var err error
	switch {
	case s.startedDB:
		if out, e := run(OVSCtl, "stop"); e != nil {
			err = fmt.Errorf("failed to stop Open vSwitch (ovs-ctl stop): %w: %s", e, out)
		}
	case s.startedVswitchd:
		if out, e := run("ovs-appctl", "-t", "ovs-vswitchd", "exit"); e != nil {
			err = fmt.Errorf("failed to stop ovs-vswitchd (ovs-appctl exit): %w: %s", e, out)
		}
	}
	s.startedDB, s.startedVswitchd = false, false
	s.unlock()
	return err
}

func (s *Session) unlock() {
	if s.lock == nil {
		return
	}
	_ = unix.Flock(int(s.lock.Fd()), unix.LOCK_UN)
	s.lock.Close()
	s.lock = nil
}

// Answers reports whether ovsdb-server accepts connections on SocketPath
// within a second.
func Answers() bool {
	c, err := net.DialTimeout("unix", SocketPath, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// VswitchdRuns reports whether ovs-vswitchd answers
// `ovs-appctl -t ovs-vswitchd version`.
func VswitchdRuns() bool {
	_, err := run("ovs-appctl", "-t", "ovs-vswitchd", "version")
	return err == nil
}

// Vsctl runs `ovs-vsctl --db=<Socket> --timeout=30 args...` within
// CmdTimeout and returns its combined output; the error is the command's
// (an *exec.ExitError when it failed).
func Vsctl(args ...string) (string, error) {
	return run("ovs-vsctl", append([]string{"--db=" + Socket, "--timeout=30"}, args...)...)
}

func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
