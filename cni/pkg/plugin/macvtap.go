package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/macvtap"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
)

// An attachment on datapath Macvtap has no host end: its interface is a
// bridge-mode macvtap on the lower device (netconf "bridge"), created
// directly in the pod's network namespace and named CNI_IFNAME, with the
// attachment's identity in its alias (hostAlias). The state file records it
// like any other (HostIfName empty), so repeated ADD, rollback, DEL and GC
// follow the same rules; the macvtap goes with its namespace, so DEL and GC
// have nothing left to do once the namespace is gone. Only the lower device
// is in the host namespace: Prepare, CheckDevice and Status read it.

// macvtapDatapath is the datapath.Datapath of datapath Macvtap. It keeps the
// lower device it read, so that one invocation looks it up once.
type macvtapDatapath struct {
	lower string
	link  netlink.Link
}

// lowerLink returns the lower device, refusing (datapath.NotMarkedError)
// one without the node agent's marker or that is the marked peer of one.
func (d *macvtapDatapath) lowerLink() (netlink.Link, error) {
	if d.link != nil {
		return d.link, nil
	}
	l, err := macvtap.Lower(d.lower)
	if errors.Is(err, macvtap.ErrLowerNotFound) {
		return nil, fmt.Errorf("%w: %w", datapath.ErrBridgeMissing, err)
	}
	if err != nil {
		return nil, err
	}
	if alias := l.Attrs().Alias; !strings.HasPrefix(alias, wellknown.MarkerKey+"=") {
		return nil, datapath.NotMarkedError(d.lower, netconf.DatapathMacvtap, fmt.Sprintf("its alias is %q, not %s=<agent>", alias, wellknown.MarkerKey))
	}
	d.link = l
	return l, nil
}

// lowerMTU returns the lower device's MTU in bytes; a missing lower device
// is CNI error 11 (ErrTryAgainLater), as a missing bridge.
func (d *macvtapDatapath) lowerMTU(conf *netconf.NetConf) (int, error) {
	lower, err := d.lowerLink()
	if errors.Is(err, datapath.ErrBridgeMissing) {
		return 0, datapath.BridgeMissingError(conf.Bridge, conf.Datapath, types.ErrTryAgainLater)
	}
	if err != nil {
		return 0, err
	}
	return lower.Attrs().MTU, nil
}

// Prepare refuses an MTU above the lower device's and a netconf deviceID
// that names no interface index (netconf.NetConf.TapIndex).
func (d *macvtapDatapath) Prepare(_ context.Context, conf *netconf.NetConf) error {
	lowerMTU, err := d.lowerMTU(conf)
	if err != nil {
		return err
	}
	if conf.MTU > lowerMTU {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
			"mtu %d is larger than the MTU %d of macvtap lower device %s: lower the attachment mtu to at most %d or raise the network's MTU (the node agent fastpath-agent sets it)",
			conf.MTU, lowerMTU, conf.Bridge, lowerMTU), "")
	}
	_, err = conf.TapIndex()
	return err
}

// Record adds nothing: a macvtap attachment has nothing outside the pod
// (HostIfName stays empty).
func (d *macvtapDatapath) Record(*state.Attachment) {}

// Create makes the macvtap in netns at the interface index of the
// netconf's deviceID, if any, switches its offloads and sets it up. A
// macvtap of its name there is reclaimed when it carries the attachment's
// alias (or none: an ADD killed before it set the alias), as on the veth
// datapaths. undo deletes the macvtap.
func (d *macvtapDatapath) Create(_ context.Context, netns ns.NetNS, a *state.Attachment, conf *netconf.NetConf, _ string) ([]*current.Interface, func(context.Context) error, error) {
	lower, err := d.lowerLink()
	if err != nil {
		return nil, nil, err
	}
	index, err := conf.TapIndex()
	if err != nil {
		return nil, nil, err
	}
	if err := refuseLowerMAC(lower, a.MAC); err != nil {
		return nil, nil, err
	}
	alias := hostAlias(a.Network, a.ContainerID, a.IfName)
	undo := func(context.Context) error { return macvtap.Delete(a.Netns, a.IfName, alias) }
	spec := macvtap.Spec{Name: a.IfName, MTU: conf.MTU, MAC: a.MAC, Index: index, Alias: alias,
		DeviceOwner: &macvtap.Owner{UID: wellknown.QEMUUID, GID: wellknown.QEMUGID}}
	link, err := macvtap.Create(netns, lower, spec)
	if errors.Is(err, unix.EEXIST) {
		// No record of this attachment was complete, so a macvtap of this
		// name carrying its alias (or none: killed before the alias was
		// set) is a leftover of an earlier ADD of it whose record is gone:
		// reclaim the name and try again. Anything else of that name is
		// refused by Delete and left alone. Looked for only now, as the
		// host veth on the bridge datapaths: the look-up is a namespace
		// switch and a request on the RTNL lock.
		if err := macvtap.Delete(a.Netns, a.IfName, alias); err != nil {
			return nil, nil, err
		}
		link, err = macvtap.Create(netns, lower, spec)
	}
	if err != nil {
		return nil, nil, err
	}
	err = netns.Do(func(ns.NetNS) error {
		if err := offload.Apply(a.IfName, conf.Offloads.Map()); err != nil {
			return fmt.Errorf("%w (datapath %s: a macvtap has its lower device's offloads)", err, netconf.DatapathMacvtap)
		}
		if err := netlink.LinkSetUp(link); err != nil {
			if errors.Is(err, unix.EADDRINUSE) {
				// The kernel refuses to open a macvlan whose MAC another
				// open macvlan of the lower device has (macvlan_open,
				// macvlan_addr_busy); refuseRecordedMAC found no record
				// of it, so it is no attachment of this node's plugin.
				return datapath.MACTakenError(link.Attrs().HardwareAddr, "macvtap lower device "+d.lower,
					"a macvtap in another network namespace that no attachment record names")
			}
			return fmt.Errorf("failed to set macvtap %s up: %w", a.IfName, err)
		}
		return nil
	})
	if err != nil {
		return nil, undo, err
	}
	a.MAC = link.Attrs().HardwareAddr.String()
	return []*current.Interface{{Name: a.IfName, Mac: a.MAC, Mtu: conf.MTU, Sandbox: a.Netns}}, undo, nil
}

// refuseLowerMAC refuses a requested MAC (mac, "" for the kernel's choice)
// that the lower device has itself: frames for it are the lower device's
// (issue 39, item 4). Other macvtaps' MACs are refuseRecordedMAC's and the
// kernel's (Create).
func refuseLowerMAC(lower netlink.Link, mac string) error {
	if mac == "" {
		return nil
	}
	m, err := net.ParseMAC(mac)
	if err != nil {
		return fmt.Errorf("failed to parse MAC %q: %w", mac, err)
	}
	if bytes.Equal(m, lower.Attrs().HardwareAddr) {
		name := lower.Attrs().Name
		return datapath.MACTakenError(m, "macvtap lower device "+name, name+", the lower device itself")
	}
	return nil
}

// CheckDevice checks that the lower device is the agent's and that its MTU
// still allows conf's.
func (d *macvtapDatapath) CheckDevice(_ context.Context, conf *netconf.NetConf, _ *state.Attachment) error {
	lowerMTU, err := d.lowerMTU(conf)
	if err != nil {
		return err
	}
	if conf.MTU > lowerMTU {
		return fmt.Errorf("failed to check attachment: mtu %d is larger than the MTU %d of macvtap lower device %s", conf.MTU, lowerMTU, conf.Bridge)
	}
	return nil
}

// CheckInterface checks that the interface is a bridge-mode macvtap on the
// lower device, up, with the MTU, mac, the attachment's alias and the
// offloads.
func (d *macvtapDatapath) CheckInterface(netns ns.NetNS, conf *netconf.NetConf, a *state.Attachment, mac string) error {
	lower, err := d.lowerLink()
	if err != nil {
		return err
	}
	return netns.Do(func(ns.NetNS) error {
		alias := hostAlias(a.Network, a.ContainerID, a.IfName)
		if err := macvtap.Verify(a.IfName, lower.Attrs().Index, conf.MTU, mac, alias); err != nil {
			return err
		}
		return offload.Verify(a.IfName, conf.Offloads.Map())
	})
}

// Exists looks for the macvtap in the attachment's netns.
func (d *macvtapDatapath) Exists(a *state.Attachment) error {
	ok, err := macvtap.Exists(a.Netns, a.IfName)
	if err != nil {
		return fmt.Errorf("its macvtap %s in %s cannot be read (%v)", a.IfName, a.Netns, err)
	}
	if !ok {
		return fmt.Errorf("its macvtap %s is gone from %s, e.g. with its netns", a.IfName, a.Netns)
	}
	return nil
}

// Remove deletes the macvtap; nothing is left once its netns is gone.
func (d *macvtapDatapath) Remove(_ context.Context, a *state.Attachment) error {
	return macvtap.Delete(a.Netns, a.IfName, hostAlias(a.Network, a.ContainerID, a.IfName))
}

// Sweep finds nothing: the macvtaps live in the pods' namespaces, which
// the host namespace cannot enumerate, and go with them.
func (d *macvtapDatapath) Sweep(context.Context, string, func(datapath.Port) bool, bool) error {
	return nil
}

// Status: 50 when the lower device is missing or not the agent's, 51 when
// it has no carrier (its macvtaps then have none either).
func (d *macvtapDatapath) Status(context.Context) error {
	l, err := d.lowerLink()
	if errors.Is(err, datapath.ErrBridgeMissing) {
		return datapath.BridgeMissingError(d.lower, netconf.DatapathMacvtap, types.ErrPluginNotAvailable)
	}
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	if l.Attrs().Flags&net.FlagUp == 0 || l.Attrs().OperState == netlink.OperDown || l.Attrs().OperState == netlink.OperLowerLayerDown {
		return types.NewError(types.ErrLimitedConnectivity, fmt.Sprintf(
			"macvtap lower device %s is down or has no carrier (operstate %s): its macvtaps do not forward; the node agent fastpath-agent sets it up", d.lower, l.Attrs().OperState), "")
	}
	return nil
}

// Close holds nothing to release.
func (d *macvtapDatapath) Close() {}
