package ovstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/fastpath-io/fastpath/internal/testing/ovsrun"
)

// Paths of Debian's openvswitch-switch package, as ovsrun names them.
const (
	// LockPath is the flock(2) target that serialises OVS-using test
	// binaries and the local node benchmark.
	LockPath = ovsrun.LockPath
	// OVSCtl is the init script helper that starts and stops ovsdb-server and ovs-vswitchd.
	OVSCtl = ovsrun.OVSCtl
	// SocketPath is where ovsdb-server listens.
	SocketPath = ovsrun.SocketPath
	// Socket is SocketPath as an OVSDB endpoint.
	Socket = ovsrun.Socket
)

var (
	mu      sync.Mutex
	users   int             // tests of this process between Start and cleanup
	session *ovsrun.Session // held while users > 0
)

// Start makes sure ovsdb-server and ovs-vswitchd run and returns the OVSDB
// endpoint ("unix:/var/run/openvswitch/db.sock"). The first Start of a
// process calls ovsrun.Start: it takes an exclusive flock on LockPath
// (waiting for other test binaries and the local node benchmark), starts OVS
// with `ovs-ctl start --system-id=random` unless it already runs, and
// enables userspace TSO before ovs-vswitchd starts: without it TCP from
// veths with checksum offload or GRO stalls on a netdev bridge. An OVS that
// already runs without userspace TSO is used with a warning in the test
// log. The last cleanup of the process stops what this process started
// (nothing when OVS was already running) and releases the lock. Concurrent
// tests of one process share one start. Start fails tb when OVS cannot be
// started.
func Start(tb testing.TB) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if users == 0 {
		s, err := ovsrun.Start(context.Background(), testr.NewWithInterface(tb, testr.Options{}))
		if err != nil {
			tb.Fatalf("failed to start Open vSwitch: %v", err)
		}
		if !s.UserspaceTSO() {
			tb.Logf("WARNING: Open_vSwitch has no other_config:userspace-tso-enable=true: TCP from veths with checksum offload or GRO stalls on netdev bridges")
		}
		session = s
	}
	users++
	tb.Cleanup(release)
	return Socket
}

// release ends one test's use; the last one stops the shared session. It
// reports to stderr, as the test that started OVS may be over by then.
func release() {
	mu.Lock()
	defer mu.Unlock()
	users--
	if users > 0 {
		return
	}
	if err := session.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "ovstest: %v\n", err)
	}
	session = nil
}

func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ovsrun.CmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
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
