package testutil

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

	"github.com/fastpath-io/fastpath/internal/datapath/ovsrun"
)

// OVSSocket is the OVSDB endpoint StartOVS returns (ovsrun.Socket).
const OVSSocket = ovsrun.Socket

var (
	ovsMu      sync.Mutex
	ovsUsers   int             // tests of this process between StartOVS and cleanup
	ovsSession *ovsrun.Session // held while ovsUsers > 0
)

// StartOVS makes sure ovsdb-server and ovs-vswitchd run and returns the OVSDB
// endpoint ("unix:/var/run/openvswitch/db.sock"). The first StartOVS of a
// process calls ovsrun.Start: it takes an exclusive flock
// (ovsrun.LockPath; waiting for other test binaries and the local node benchmark), starts OVS
// with `ovs-ctl start --system-id=random` unless it already runs, and
// enables userspace TSO before ovs-vswitchd starts: without it TCP from
// veths with checksum offload or GRO stalls on a netdev bridge. An OVS that
// already runs without userspace TSO is used with a warning in the test
// log. The last cleanup of the process stops what this process started
// (nothing when OVS was already running) and releases the lock. Concurrent
// tests of one process share one start. StartOVS fails tb when OVS cannot be
// started.
func StartOVS(tb testing.TB) string {
	tb.Helper()
	ovsMu.Lock()
	defer ovsMu.Unlock()
	if ovsUsers == 0 {
		s, err := ovsrun.Start(context.Background(), testr.NewWithInterface(tb, testr.Options{}))
		if err != nil {
			tb.Fatalf("failed to start Open vSwitch: %v", err)
		}
		if !s.UserspaceTSO() {
			tb.Logf("WARNING: Open_vSwitch has no other_config:userspace-tso-enable=true: TCP from veths with checksum offload or GRO stalls on netdev bridges")
		}
		ovsSession = s
	}
	ovsUsers++
	tb.Cleanup(releaseOVS)
	return OVSSocket
}

// releaseOVS ends one test's use; the last one stops the shared ovsSession. It
// reports to stderr, as the test that started OVS may be over by then.
func releaseOVS() {
	ovsMu.Lock()
	defer ovsMu.Unlock()
	ovsUsers--
	if ovsUsers > 0 {
		return
	}
	if err := ovsSession.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
	}
	ovsSession = nil
}

func runOVSCmd(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ovsrun.CmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// AddOVSBridge creates the OVS bridge name with the userspace datapath
// (datapath_type=netdev), its internal interface's mtu_request set to mtu
// bytes (without it OVS gives the internal interface the smallest MTU of the
// other ports, 1500 when there are none) and the node agent's marker
// external_ids:fastpath.io/managed-by (the CNI plugin attaches only to marked
// bridges), and deletes it at cleanup.
// socket is the OVSDB endpoint StartOVS returned.
func AddOVSBridge(tb testing.TB, socket, name string, mtu int) {
	tb.Helper()
	args := []string{"--db=" + socket, "--timeout=30", "add-br", name,
		"--", "set", "Bridge", name, "datapath_type=netdev", `external_ids:"fastpath.io/managed-by"=ovstest`,
		"--", "set", "Interface", name, "mtu_request=" + strconv.Itoa(mtu)}
	if out, err := runOVSCmd("ovs-vsctl", args...); err != nil {
		tb.Fatalf("failed to add OVS bridge %s: %v: %s", name, err, out)
	}
	tb.Cleanup(func() {
		if out, err := runOVSCmd("ovs-vsctl", "--db="+socket, "--timeout=30", "--if-exists", "del-br", name); err != nil {
			tb.Errorf("failed to delete OVS bridge %s: %v: %s", name, err, out)
		}
	})
	// ovs-vsctl waited for ovs-vswitchd to reconfigure; check the MTU took.
	out, err := runOVSCmd("ovs-vsctl", "--db="+socket, "get", "Interface", name, "mtu")
	if err != nil || strings.TrimSpace(out) != strconv.Itoa(mtu) {
		tb.Fatalf("failed to set MTU %d on OVS bridge %s: mtu is %q (%v)", mtu, name, strings.TrimSpace(out), err)
	}
}
