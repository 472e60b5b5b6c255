package localbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsrun"
)

// OVSSocket is the OVSDB endpoint of the local ovsdb-server (ovsrun.Socket).
const OVSSocket = ovsrun.Socket

// ovsSession is this run's use of Open vSwitch.
type ovsSession struct {
	run *ovsrun.Session
	log logr.Logger
	// unnice restores ovs-vswitchd's niceness (see renice).
	unnice func() error
}

// vswitchdPid reads the pid of the running ovs-vswitchd.
func vswitchdPid() (int, error) {
	raw, err := os.ReadFile(ovsrun.VswitchdPidFile)
	if err != nil {
		return 0, fmt.Errorf("failed to read the pid of ovs-vswitchd: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("failed to parse the pid of ovs-vswitchd in %s: %q", ovsrun.VswitchdPidFile, raw)
	}
	return pid, nil
}

// renice gives ovs-vswitchd, which forwards every packet of the userspace
// datapath, the benchmark's niceness n, so that the netperf processes do
// not starve it; stop restores it.
func (s *ovsSession) renice(n int) error {
	raw, err := os.ReadFile(ovsrun.VswitchdPidFile)
	if err != nil {
		return fmt.Errorf("failed to read the pid of ovs-vswitchd: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("failed to parse the pid of ovs-vswitchd in %s: %q", ovsrun.VswitchdPidFile, raw)
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
var ErrOVSUnusable = errors.New("open vswitch cannot be used for fastpath-ovs")

// startOVS starts Open vSwitch with ovsrun.Start, which takes the lock that
// OVS-using tests take too (waiting for them while they hold it) and makes
// sure ovsdb-server and ovs-vswitchd run with userspace TSO, starting them
// with ovs-ctl when they do not (ovs-vswitchd reads userspace-tso-enable
// only at start; without it TCP from TSO-enabled veths stalls on a netdev
// bridge, and the fastpath plugin refuses such a bridge). An OVS that runs
// without userspace TSO is not restarted: it is someone else's, and the
// error wraps ErrOVSUnusable, as it does when OVS is not installed. Call
// stop when done.
func startOVS(ctx context.Context, log logr.Logger) (*ovsSession, error) {
	r, err := ovsrun.Start(ctx, log)
	if errors.Is(err, ovsrun.ErrNotInstalled) {
		return nil, fmt.Errorf("%w: %w", ErrOVSUnusable, err)
	}
	if err != nil {
		return nil, err
	}
	s := &ovsSession{run: r, log: log}
	if !r.UserspaceTSO() {
		if err := s.stop(); err != nil {
			log.Error(err, "Failed to release Open vSwitch")
		}
		return nil, fmt.Errorf("%w: the running ovs-vswitchd has no other_config:userspace-tso-enable=true (set it and restart ovs-vswitchd)", ErrOVSUnusable)
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
	if s.run != nil {
		if s.run.Started() {
			s.log.Info("Stopping the Open vSwitch this run started")
		}
		err = errors.Join(err, s.run.Stop())
		s.run = nil
	}
	return err
}

// listOVSBridges returns the OVS bridges; an error when OVS does not answer.
func listOVSBridges() ([]string, error) {
	if !ovsrun.Answers() {
		return nil, fmt.Errorf("failed to list OVS bridges: %s does not answer", ovsrun.SocketPath)
	}
	out, err := ovsrun.Vsctl("list-br")
	if err != nil {
		return nil, fmt.Errorf("failed to list OVS bridges: %w: %s", err, out)
	}
	return strings.Fields(out), nil
}

// deleteOVSBridge deletes the OVS bridge name with its ports; a missing
// bridge is success.
func deleteOVSBridge(name string) error {
	if out, err := ovsrun.Vsctl("--if-exists", "del-br", name); err != nil {
		return fmt.Errorf("failed to delete OVS bridge %s: %w: %s", name, err, out)
	}
	return nil
}

// ovsDatapathType returns the datapath_type Open vSwitch reports for
// bridge name ("" is the default, the kernel datapath "system").
func ovsDatapathType(name string) (string, error) {
	out, err := ovsrun.Vsctl("get", "Bridge", name, "datapath_type")
	if err != nil {
		return "", fmt.Errorf("failed to read the datapath_type of OVS bridge %s: %w: %s", name, err, out)
	}
	return strings.Trim(strings.TrimSpace(out), `"`), nil
}

// ovsCPUNotApplicable says whether the CPU per byte measured through OVS
// bridge name with datapath type dt (as OVS reported it) says nothing about
// the product, and why: on the userspace datapath (ovsdb.DatapathNetdev)
// ovs-vswitchd forwards every packet in a userspace thread, while a node
// runs the kernel datapath (ovsdb.DatapathSystem, the openvswitch module);
// the throughput targets are unaffected (fastpath-ovs only competes in
// "best fast path", where a slower path cannot win).
func ovsCPUNotApplicable(name, dt string) (string, bool) {
	if dt != ovsdb.DatapathNetdev {
		return "", false
	}
	return fmt.Sprintf("Open vSwitch ran its userspace datapath in this run (bridge %s reported datapath_type=%s): "+
		"ovs-vswitchd forwarded every packet in userspace, while a node runs the kernel datapath (datapath_type=%s, the openvswitch module), "+
		"so this CPU per byte says nothing about OVS on a node", name, dt, ovsdb.DatapathSystem), true
}
