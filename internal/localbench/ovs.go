package localbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
)

// Open vSwitch as Debian's openvswitch-switch package installs it. The lock
// is the one internal/testutil/ovstest takes (ovstest.LockPath), so the
// benchmark and OVS-using test binaries never start or stop OVS under each
// other.
const (
	ovsLockPath = "/run/fastpath-ovstest.lock"
	ovsCtl      = "/usr/share/openvswitch/scripts/ovs-ctl"
	ovsDBSocket = "/var/run/openvswitch/db.sock"
	// OVSSocket is the OVSDB endpoint of the local ovsdb-server.
	OVSSocket = "unix:" + ovsDBSocket
	// ovsCmdTimeout bounds each ovs-ctl and ovs-vsctl call.
	ovsCmdTimeout = 60 * time.Second
)

// vswitchdPidFile is where ovs-ctl records ovs-vswitchd's pid.
const vswitchdPidFile = "/var/run/openvswitch/ovs-vswitchd.pid"

// ovsSession is this run's use of Open vSwitch.
type ovsSession struct {
	lock    *os.File
	started bool
	log     logr.Logger
	// unnice restores ovs-vswitchd's niceness (see renice).
	unnice func() error
}

// renice gives ovs-vswitchd, which forwards every packet of the userspace
// datapath, the benchmark's niceness n, so that the netperf processes do
// not starve it; stop restores it.
func (s *ovsSession) renice(n int) error {
	raw, err := os.ReadFile(vswitchdPidFile)
	if err != nil {
		return fmt.Errorf("failed to read the pid of ovs-vswitchd: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("failed to parse the pid of ovs-vswitchd in %s: %q", vswitchdPidFile, raw)
	}
	restore, err := setNice(pid, n, true)
	s.unnice = restore
	if err != nil {
		return err
	}
	s.log.Info("Set the niceness of ovs-vswitchd for the benchmark", "pid", pid, "nice", n)
	return nil
}

// ErrOVSUnusable is wrapped by startOVS when Open vSwitch cannot carry the
// fastpath-ovs path here; the benchmark then skips that path and says why.
var ErrOVSUnusable = errors.New("Open vSwitch cannot be used for fastpath-ovs")

// startOVS takes the OVS lock (waiting for tests that hold it) and makes
// sure ovsdb-server and ovs-vswitchd run with userspace TSO, starting them
// with ovs-ctl when they do not (ovs-vswitchd reads userspace-tso-enable
// only at start; without it TCP from TSO-enabled veths stalls on a netdev
// bridge, and the fastpath plugin refuses such a bridge). An OVS that runs
// without userspace TSO is not restarted: it is someone else's, and the
// error wraps ErrOVSUnusable. Call stop when done.
func startOVS(ctx context.Context, log logr.Logger) (*ovsSession, error) {
	if _, err := os.Stat(ovsCtl); err != nil {
		return nil, fmt.Errorf("%w: %s is missing (install openvswitch-switch): %v", ErrOVSUnusable, ovsCtl, err)
	}
	f, err := os.OpenFile(ovsLockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to open %s: %w", ovsLockPath, err)
	}
	logged := false
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("failed to lock %s: %w", ovsLockPath, err)
		}
		if !logged {
			log.Info("Waiting for the Open vSwitch lock (OVS tests are running)", "lock", ovsLockPath)
			logged = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("failed to lock %s: %w", ovsLockPath, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	s := &ovsSession{lock: f, log: log}
	if ovsdbAnswers() && vswitchdRuns() {
		out, err := vsctl("get", "Open_vSwitch", ".", "other_config:userspace-tso-enable")
		if err != nil || strings.Trim(out, "\"\n") != "true" {
			s.stop()
			return nil, fmt.Errorf("%w: the running ovs-vswitchd has no other_config:userspace-tso-enable=true (set it and restart ovs-vswitchd)", ErrOVSUnusable)
		}
		log.Info("Using the Open vSwitch that is already running")
		return s, nil
	}
	s.started = true
	log.Info("Starting Open vSwitch with userspace TSO", "ovsCtl", ovsCtl)
	if out, err := run(ovsCtl, "start", "--system-id=random", "--no-ovs-vswitchd"); err != nil {
		s.stop()
		return nil, fmt.Errorf("failed to start ovsdb-server (ovs-ctl start --no-ovs-vswitchd): %w: %s", err, out)
	}
	if out, err := vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true"); err != nil {
		s.stop()
		return nil, fmt.Errorf("failed to enable userspace TSO: %w: %s", err, out)
	}
	if out, err := run(ovsCtl, "start", "--system-id=random", "--no-ovsdb-server"); err != nil {
		s.stop()
		return nil, fmt.Errorf("failed to start ovs-vswitchd (ovs-ctl start --no-ovsdb-server): %w: %s", err, out)
	}
	if !ovsdbAnswers() || !vswitchdRuns() {
		s.stop()
		return nil, fmt.Errorf("failed to start Open vSwitch: ovs-ctl returned but %s does not answer or ovs-vswitchd is not running", ovsDBSocket)
	}
	return s, nil
}

// stop stops Open vSwitch if this run started it and releases the lock.
func (s *ovsSession) stop() error {
	var err error
	if s.unnice != nil {
		err = s.unnice()
		s.unnice = nil
	}
	if s.started {
		s.log.Info("Stopping the Open vSwitch this run started")
		if out, e := run(ovsCtl, "stop"); e != nil {
			err = errors.Join(err, fmt.Errorf("failed to stop Open vSwitch (ovs-ctl stop): %w: %s", e, out))
		}
		s.started = false
	}
	if s.lock != nil {
		_ = unix.Flock(int(s.lock.Fd()), unix.LOCK_UN)
		s.lock.Close()
		s.lock = nil
	}
	return err
}

// ovsdbAnswers reports whether ovsdb-server accepts connections.
func ovsdbAnswers() bool {
	c, err := net.DialTimeout("unix", ovsDBSocket, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// vswitchdRuns reports whether ovs-vswitchd answers on its control socket.
func vswitchdRuns() bool {
	_, err := run("ovs-appctl", "-t", "ovs-vswitchd", "version")
	return err == nil
}

// listOVSBridges returns the OVS bridges; an error when OVS does not answer.
func listOVSBridges() ([]string, error) {
	if !ovsdbAnswers() {
		return nil, fmt.Errorf("failed to list OVS bridges: %s does not answer", ovsDBSocket)
	}
	out, err := vsctl("list-br")
	if err != nil {
		return nil, fmt.Errorf("failed to list OVS bridges: %w: %s", err, out)
	}
	return strings.Fields(out), nil
}

// deleteOVSBridge deletes the OVS bridge name with its ports; a missing
// bridge is success.
func deleteOVSBridge(name string) error {
	if out, err := vsctl("--if-exists", "del-br", name); err != nil {
		return fmt.Errorf("failed to delete OVS bridge %s: %w: %s", name, err, out)
	}
	return nil
}

func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ovsCmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

func vsctl(args ...string) (string, error) {
	return run("ovs-vsctl", append([]string{"--db=" + OVSSocket, "--timeout=30"}, args...)...)
}
