package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

// Device paths under the device directory (Host.DevDir, default /dev).
const (
	// VhostNetDevice is created by the vhost_net module.
	VhostNetDevice = "vhost-net"
	// VhostVSOCKDevice is created by the vhost_vsock module.
	VhostVSOCKDevice = "vhost-vsock"
	// TunDevice is created by the tun module.
	TunDevice = "net/tun"
)

// Admin-facing explanations of missing capabilities.
const (
	// MsgVhostNetMissing: without vhost-net QEMU emulates virtio-net in
	// userspace, far slower than the in-kernel backend.
	MsgVhostNetMissing = "/dev/vhost-net is missing: vhost_net module not loaded: run modprobe vhost_net (without it QEMU runs virtio-net in userspace)"
	// MsgVhostVSOCKMissing: without vhost-vsock KubeVirt cannot give a VM a
	// vsock device, so the relay has no guests to serve.
	MsgVhostVSOCKMissing = "/dev/vhost-vsock is missing: vhost_vsock module not loaded: run modprobe vhost_vsock"
	// MsgTunMissing: virt-launcher needs tun for the VM's tap devices.
	MsgTunMissing = "/dev/net/tun is missing: tun module not loaded: run modprobe tun"
	// MsgMacvtapMissing: the CNI plugin cannot make a pod's macvtap on a
	// Macvtap network (it asks the kernel to load the module, which works
	// only where the module is installed).
	MsgMacvtapMissing = "the kernel has no macvtap (/sys/class/macvtap is missing): run modprobe macvtap, or pods on Macvtap networks fail to start on this node"
)

// Paths under the sysfs directory (Host.SysDir, default /sys) whose
// existence says the kernel has a datapath's driver loaded (or built in).
const (
	// BridgeModule exists while the bridge driver is loaded or built in.
	BridgeModule = "module/bridge"
	// MacvtapClass is the device class the macvtap driver registers.
	MacvtapClass = "class/macvtap"
)

// DefaultOVSTimeout bounds the OVS probe (dial, monitor and read).
const DefaultOVSTimeout = 3 * time.Second

// Prober reports a node's capabilities. Probe never fails: what it cannot
// find is reported as absent, with a message where one helps.
type Prober interface {
	Probe(ctx context.Context) fastpathv1alpha1.NodeCapabilities
}

// Host probes the node the process runs on.
type Host struct {
	// DevDir is the device directory; empty means /dev.
	DevDir string
	// SysDir is the sysfs directory; empty means /sys.
	SysDir string
	// OVS reaches OVSDB; nil reports OVS as not reachable ("no OVSDB
	// endpoint configured").
	OVS *ovsdb.Conn
	// OVSTimeout bounds the OVS probe; 0 means DefaultOVSTimeout.
	OVSTimeout time.Duration
}

var _ Prober = (*Host)(nil)

// Probe checks the devices (existence only: the agent never opens them), the
// kernel release (uname -r), OVS, and which datapaths the node can carry
// (DatapathTypes: LinuxBridge with the bridge driver loaded, OVS with OVSDB
// answering, Macvtap with the macvtap driver loaded). A driver that is
// installed as a module but not loaded yet is not listed: the kernel loads it
// on first use, but only an admin's modprobe makes that certain.
func (h *Host) Probe(ctx context.Context) fastpathv1alpha1.NodeCapabilities {
	dev, sys := h.DevDir, h.SysDir
	if dev == "" {
		dev = "/dev"
	}
	if sys == "" {
		sys = "/sys"
	}
	caps := fastpathv1alpha1.NodeCapabilities{
		VhostNet:   exists(filepath.Join(dev, VhostNetDevice)),
		VhostVSOCK: exists(filepath.Join(dev, VhostVSOCKDevice)),
		Tun:        exists(filepath.Join(dev, TunDevice)),
		Kernel:     kernelRelease(),
		OVS:        h.probeOVS(ctx),
	}
	if exists(filepath.Join(sys, BridgeModule)) {
		caps.DatapathTypes = append(caps.DatapathTypes, fastpathv1alpha1.DatapathLinuxBridge)
	}
	if caps.OVS.Reachable {
		caps.DatapathTypes = append(caps.DatapathTypes, fastpathv1alpha1.DatapathOVS)
	}
	if exists(filepath.Join(sys, MacvtapClass)) {
		caps.DatapathTypes = append(caps.DatapathTypes, fastpathv1alpha1.DatapathMacvtap)
	}
	return caps
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// kernelRelease returns uname(2)'s release, e.g. "6.1.0-28-amd64"; "" when
// uname fails.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

func (h *Host) probeOVS(ctx context.Context) *fastpathv1alpha1.OVSInfo {
	if h.OVS == nil {
		return &fastpathv1alpha1.OVSInfo{Message: "no OVSDB endpoint configured"}
	}
	timeout := h.OVSTimeout
	if timeout <= 0 {
		timeout = DefaultOVSTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := h.OVS.Client(ctx)
	if err != nil {
		return &fastpathv1alpha1.OVSInfo{Message: unreachableMessage(h.OVS.Endpoint(), err)}
	}
	sys, err := c.System(ctx)
	if err != nil {
		return &fastpathv1alpha1.OVSInfo{Message: err.Error()}
	}
	info := &fastpathv1alpha1.OVSInfo{Reachable: true, Version: sys.Version, DatapathTypes: sys.DatapathTypes}
	if len(sys.DatapathTypes) == 0 {
		info.Message = "ovs-vswitchd has not reported datapath types: is ovs-vswitchd running?"
	}
	return info
}

func unreachableMessage(endpoint string, err error) string {
	if errors.Is(err, ovsdb.ErrUnreachable) {
		return fmt.Sprintf("OVSDB at %s does not answer (%v): is Open vSwitch installed and running (e.g. systemctl start openvswitch-switch)?", endpoint, rootCause(err))
	}
	return err.Error()
}

// rootCause returns the network error under err when there is one (e.g.
// "dial unix /var/run/openvswitch/db.sock: connect: no such file or
// directory"), else err.
func rootCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op
	}
	return err
}

// Problems returns the admin-facing explanations of the devices c lacks, in
// the order vhost-net, vhost-vsock, tun. OVS is left out: whether it matters
// depends on the datapaths asked for (see OVSInfo.Message).
func Problems(c fastpathv1alpha1.NodeCapabilities) []string {
	var out []string
	if !c.VhostNet {
		out = append(out, MsgVhostNetMissing)
	}
	if !c.VhostVSOCK {
		out = append(out, MsgVhostVSOCKMissing)
	}
	if !c.Tun {
		out = append(out, MsgTunMissing)
	}
	return out
}

// Static is a Prober that returns fixed capabilities, for tests and the demo.
type Static struct {
	Capabilities fastpathv1alpha1.NodeCapabilities
}

var _ Prober = Static{}

// Probe returns a deep copy of s.Capabilities.
func (s Static) Probe(context.Context) fastpathv1alpha1.NodeCapabilities {
	return *s.Capabilities.DeepCopy()
}
