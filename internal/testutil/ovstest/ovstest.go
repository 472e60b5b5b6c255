package ovstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Paths of Debian's openvswitch-switch package.
const (
	// LockPath is the flock(2) target that serialises OVS-using test binaries.
	LockPath = "/run/fastpath-ovstest.lock"
	// OVSCtl is the init script helper that starts and stops ovsdb-server and ovs-vswitchd.
	OVSCtl = "/usr/share/openvswitch/scripts/ovs-ctl"
	// SocketPath is where ovsdb-server listens.
	SocketPath = "/var/run/openvswitch/db.sock"
	// Socket is SocketPath as an OVSDB endpoint.
	Socket = "unix:" + SocketPath
)

// cmdTimeout bounds each ovs-ctl and ovs-vsctl call.
const cmdTimeout = 60 * time.Second

var (
	mu              sync.Mutex
	users           int      // tests of this process between Start and cleanup
	lockFile        *os.File // held while users > 0
	startedDB       bool     // this process started ovsdb-server and must stop it
	startedVswitchd bool     // this process started ovs-vswitchd and must stop it
)

// Start makes sure ovsdb-server and ovs-vswitchd run and returns the OVSDB
// endpoint ("unix:/var/run/openvswitch/db.sock"). The first Start of a
// process takes an exclusive flock on LockPath (waiting for other test
// binaries), starts OVS with `ovs-ctl start --system-id=random` unless the
// socket already answers, and enables userspace TSO before ovs-vswitchd
// starts: without it TCP from veths with checksum offload or GRO stalls on a
// netdev bridge. The last cleanup of the process stops what this process
// started (nothing when OVS was already running) and releases the lock.
// Concurrent tests of one process share one start.
func Start(tb testing.TB) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if users == 0 {
		if err := acquire(tb); err != nil {
			unlock()
			tb.Fatalf("failed to start Open vSwitch: %v", err)
		}
	}
	users++
	tb.Cleanup(release)
	return Socket
}

func acquire(tb testing.TB) error {
	f, err := os.OpenFile(LockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", LockPath, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("failed to lock %s: %w", LockPath, err)
	}
	lockFile = f
	if answers() && vswitchdRuns() {
		tb.Logf("Using the Open vSwitch that is already running")
		if out, err := vsctl("get", "Open_vSwitch", ".", "other_config:userspace-tso-enable"); err != nil || strings.Trim(out, "\"\n") != "true" {
			tb.Logf("WARNING: Open_vSwitch has no other_config:userspace-tso-enable=true: TCP from veths with checksum offload or GRO stalls on netdev bridges")
		}
		return nil
	}
	if !answers() {
		startedDB = true
		if out, err := run(OVSCtl, "start", "--system-id=random", "--no-ovs-vswitchd"); err != nil {
			stop()
			return fmt.Errorf("ovs-ctl start --no-ovs-vswitchd: %w: %s", err, out)
		}
	}
	// Configure userspace TSO before ovs-vswitchd starts: it reads it only then.
	if out, err := vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true"); err != nil {
		stop()
		return fmt.Errorf("failed to enable userspace TSO: %w: %s", err, out)
	}
	startedVswitchd = true
	if out, err := run(OVSCtl, "start", "--system-id=random", "--no-ovsdb-server"); err != nil {
		stop()
		return fmt.Errorf("ovs-ctl start --no-ovsdb-server: %w: %s", err, out)
	}
	if !answers() || !vswitchdRuns() {
		stop()
		return fmt.Errorf("ovs-ctl started Open vSwitch but %s does not answer or ovs-vswitchd is not running", SocketPath)
	}
	return nil
}

func release() {
	mu.Lock()
	defer mu.Unlock()
	users--
	if users > 0 {
		return
	}
	stop()
	unlock()
}

// unlock releases the flock on LockPath if this process holds it.
func unlock() {
	if lockFile == nil {
		return
	}
	_ = unix.Flock(int(lockFile.Fd()), unix.LOCK_UN)
	lockFile.Close()
	lockFile = nil
}

// stop stops what this process started: both daemons with `ovs-ctl stop`,
// or only ovs-vswitchd when ovsdb-server was already running.
func stop() {
	switch {
	case startedDB:
		if out, err := run(OVSCtl, "stop"); err != nil {
			fmt.Fprintf(os.Stderr, "ovstest: ovs-ctl stop: %v: %s\n", err, out)
		}
	case startedVswitchd:
		if out, err := run("ovs-appctl", "-t", "ovs-vswitchd", "exit"); err != nil {
			fmt.Fprintf(os.Stderr, "ovstest: ovs-appctl exit: %v: %s\n", err, out)
		}
	}
	startedDB, startedVswitchd = false, false
}

// answers reports whether ovsdb-server accepts connections on SocketPath.
func answers() bool {
	c, err := net.DialTimeout("unix", SocketPath, time.Second)
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

func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

func vsctl(args ...string) (string, error) {
	return run("ovs-vsctl", append([]string{"--db=" + Socket, "--timeout=30"}, args...)...)
}

// AddBridge creates the OVS bridge name with the userspace datapath
// (datapath_type=netdev), its internal interface's mtu_request set to mtu
// bytes (without it OVS gives the internal interface the smallest MTU of the
// other ports, 1500 when there are none), and deletes it at cleanup.
// socket is the OVSDB endpoint Start returned.
func AddBridge(tb testing.TB, socket, name string, mtu int) {
	tb.Helper()
	args := []string{"--db=" + socket, "--timeout=30", "add-br", name,
		"--", "set", "Bridge", name, "datapath_type=netdev",
		"--", "set", "Interface", name, "mtu_request=" + strconv.Itoa(mtu)}
	if out, err := run("ovs-vsctl", args...); err != nil {
		tb.Fatalf("failed to add OVS bridge %s: %v: %s", name, err, out)
	}
	tb.Cleanup(func() {
		if out, err := run("ovs-vsctl", "--db="+socket, "--timeout=30", "--if-exists", "del-br", name); err != nil {
			tb.Errorf("failed to delete OVS bridge %s: %v: %s", name, err, out)
		}
	})
	// ovs-vsctl waited for ovs-vswitchd to reconfigure; check the MTU took.
	out, err := run("ovs-vsctl", "--db="+socket, "get", "Interface", name, "mtu")
	if err != nil || strings.TrimSpace(out) != strconv.Itoa(mtu) {
		tb.Fatalf("failed to set MTU %d on OVS bridge %s: mtu is %q (%v)", mtu, name, strings.TrimSpace(out), err)
	}
}
