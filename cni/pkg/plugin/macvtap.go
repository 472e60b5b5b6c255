package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/macvtap"
	"github.com/fastpath-io/fastpath/cni/pkg/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
)

// An attachment on datapath Macvtap has no host end: its interface is a
// bridge-mode macvtap on the lower device (netconf "bridge"), created
// directly in the pod's network namespace and named CNI_IFNAME, with the
// attachment's identity in its alias (hostAlias). The state file records it
// like any other (HostIfName empty), so repeated ADD, rollback, DEL and GC
// follow the same rules; the macvtap goes with its namespace, so DEL and GC
// have nothing left to do once the namespace is gone.

// macvtapDatapath is the lower device side of datapath Macvtap: bridgeMTU
// and status read the lower device; there are no ports to attach, verify or
// list (the macvtaps live in the pods' namespaces, which the host namespace
// cannot enumerate).
type macvtapDatapath struct {
	lower string
}

// lowerLink returns the lower device, refusing (datapath.NotMarkedError)
// one without the node agent's marker or that is the marked peer of one.
func (d *macvtapDatapath) lowerLink() (netlink.Link, error) {
	l, err := macvtap.Lower(d.lower)
	if errors.Is(err, macvtap.ErrLowerNotFound) {
		return nil, fmt.Errorf("%w: %w", datapath.ErrBridgeMissing, err)
	}
	if err != nil {
		return nil, err
	}
	if alias := l.Attrs().Alias; !strings.HasPrefix(alias, datapath.MarkerKey+"=") {
		return nil, datapath.NotMarkedError(d.lower, netconf.DatapathMacvtap, fmt.Sprintf("its alias is %q, not %s=<agent>", alias, datapath.MarkerKey))
	}
	return l, nil
}

func (d *macvtapDatapath) BridgeMTU(context.Context) (int, error) {
	l, err := d.lowerLink()
	if err != nil {
		return 0, err
	}
	return l.Attrs().MTU, nil
}

func (d *macvtapDatapath) Preflight(context.Context, map[string]bool) error { return nil }

func (d *macvtapDatapath) Attach(context.Context, *state.Attachment, datapath.HostEnd, string) error {
	return fmt.Errorf("datapath %s has no bridge port to attach", netconf.DatapathMacvtap)
}

func (d *macvtapDatapath) Detach(context.Context, string) error { return nil }

func (d *macvtapDatapath) Verify(context.Context, string) error { return nil }

func (d *macvtapDatapath) Ports(context.Context) ([]datapath.Port, error) { return nil, nil }

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

func (d *macvtapDatapath) Close() {}

// addMacvtap is CmdAdd from the datapath on: the caller took the locks and
// found no complete record of the attachment (reclaiming an unfinished one).
// It checks the lower device and the MTU, records the attachment, starts
// the IPAM plugin, meanwhile creates the macvtap in the netns (at the
// interface index of the netconf's deviceID, if any), switches its
// offloads and brings it up, and configures the addresses. On any failure it undoes what it created (IPAM
// allocation, macvtap, state file) and nothing else.
func addMacvtap(ctx context.Context, args *skel.CmdArgs, conf *netconf.NetConf, cniVersion string,
	store *state.Store, ipamEx *ipamExec, mac string) (err error) {
	d := &macvtapDatapath{lower: conf.Bridge}
	lower, err := d.lowerLink()
	if errors.Is(err, datapath.ErrBridgeMissing) {
		return datapath.BridgeMissingError(conf.Bridge, conf.Datapath, types.ErrTryAgainLater)
	}
	if err != nil {
		return err
	}
	if conf.MTU > lower.Attrs().MTU {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
			"mtu %d is larger than the MTU %d of macvtap lower device %s: lower the attachment mtu to at most %d or raise the network's MTU (the node agent fastpath-agent sets it)",
			conf.MTU, lower.Attrs().MTU, conf.Bridge, lower.Attrs().MTU), "")
	}
	index, err := conf.TapIndex()
	if err != nil {
		return err
	}
	netns, err := openNetNS(args.Netns)
	if err != nil {
		return err
	}
	defer netns.Close()

	alias := hostAlias(conf.Name, args.ContainerID, args.IfName)
	att := &state.Attachment{
		ContainerID: args.ContainerID, IfName: args.IfName, Netns: args.Netns, Network: conf.Name,
		Datapath: conf.Datapath, Bridge: conf.Bridge, MAC: mac,
		IPAMType: conf.IPAM.Type(), NetConf: args.StdinData, IPAMConf: conf.IPAMConf, Args: args.Args,
	}
	// Recorded before anything is made, so that DEL and GC find whatever a
	// crash in the middle of this ADD leaves behind.
	if err := store.Save(att); err != nil {
		return err
	}
	// The IPAM plugin runs beside the macvtap set-up, as on the bridge
	// datapaths (see CmdAdd); its DEL is run on failure even when its ADD
	// failed, after its ADD ended.
	ipamRun := startIPAM(ctx, conf.IPAM.Type(), conf.IPAMConf, ipamEx)
	var made bool
	defer func() {
		if err == nil {
			return
		}
		logger.Printf("Rolling back failed ADD container=%s ifname=%s error=%q", args.ContainerID, args.IfName, err)
		rctx, rcancel := context.WithTimeout(context.Background(), opTimeout)
		defer rcancel()
		_, _ = ipamRun.wait() // its ADD ended, with or without addresses
		if derr := invoke.DelegateDel(rctx, conf.IPAM.Type(), conf.IPAMConf, ipamEx); derr != nil {
			logger.Printf("Rollback failed to release addresses ipam=%s error=%q", conf.IPAM.Type(), derr)
		}
		if made {
			if derr := macvtap.Delete(args.Netns, args.IfName, alias); derr != nil {
				logger.Printf("Rollback failed to delete macvtap=%s error=%q", args.IfName, derr)
			}
		}
		if derr := store.Delete(args.ContainerID, args.IfName); derr != nil {
			logger.Printf("Rollback failed to remove state error=%q", derr)
		}
	}()

	spec := macvtap.Spec{Name: args.IfName, MTU: conf.MTU, MAC: mac, Index: index, Alias: alias}
	link, err := macvtap.Create(netns, lower, spec)
	if errors.Is(err, unix.EEXIST) {
		// No record of this attachment was complete, so a macvtap of this
		// name carrying its alias (or none: killed before the alias was
		// set) is a leftover of an earlier ADD of it whose record is gone:
		// reclaim the name and try again. Anything else of that name is
		// refused by Delete and left alone. Looked for only now, as the
		// host veth on the bridge datapaths: the look-up is a namespace
		// switch and a request on the RTNL lock.
		if err := macvtap.Delete(args.Netns, args.IfName, alias); err != nil {
			return err
		}
		link, err = macvtap.Create(netns, lower, spec)
	}
	if err != nil {
		return err
	}
	made = true
	err = netns.Do(func(ns.NetNS) error {
		if err := offload.Apply(args.IfName, conf.Offloads.Map()); err != nil {
			return fmt.Errorf("%w (datapath %s: a macvtap has its lower device's offloads)", err, netconf.DatapathMacvtap)
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("failed to set macvtap %s up: %w", args.IfName, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	att.MAC = link.Attrs().HardwareAddr.String()

	r, err := ipamRun.wait()
	result, err := ipamResult(conf, r, err)
	if err != nil {
		return err
	}
	result.Interfaces = []*current.Interface{{Name: args.IfName, Mac: att.MAC, Mtu: conf.MTU, Sandbox: args.Netns}}
	return completeAdd(netns, store, att, result, 0, cniVersion)
}

// checkMacvtap is CmdCheck for a complete attachment on datapath Macvtap:
// the lower device is the agent's and its MTU still allows conf.MTU, the
// IPAM plugin's CHECK passes, and in the netns the interface is a
// bridge-mode macvtap on that lower device, up, with the MTU, the MAC of
// prevResult, the attachment's alias, the offloads, addresses and routes.
func checkMacvtap(ctx context.Context, args *skel.CmdArgs, conf *netconf.NetConf, prev *current.Result, contIface *current.Interface, ipamEx *ipamExec) error {
	d := &macvtapDatapath{lower: conf.Bridge}
	lower, err := d.lowerLink()
	if errors.Is(err, datapath.ErrBridgeMissing) {
		return datapath.BridgeMissingError(conf.Bridge, conf.Datapath, types.ErrTryAgainLater)
	}
	if err != nil {
		return err
	}
	if conf.MTU > lower.Attrs().MTU {
		return fmt.Errorf("failed to check attachment: mtu %d is larger than the MTU %d of macvtap lower device %s", conf.MTU, lower.Attrs().MTU, conf.Bridge)
	}
	if err := invoke.DelegateCheck(ctx, conf.IPAM.Type(), conf.IPAMConf, ipamEx); err != nil {
		return fmt.Errorf("failed to check addresses with IPAM plugin %s: %w", conf.IPAM.Type(), err)
	}
	netns, err := openNetNS(args.Netns)
	if err != nil {
		return err
	}
	defer netns.Close()
	return netns.Do(func(ns.NetNS) error {
		alias := hostAlias(conf.Name, args.ContainerID, args.IfName)
		if err := macvtap.Verify(args.IfName, lower.Attrs().Index, conf.MTU, contIface.Mac, alias); err != nil {
			return err
		}
		if err := offload.Verify(args.IfName, conf.Offloads.Map()); err != nil {
			return err
		}
		if err := ip.ValidateExpectedInterfaceIPs(args.IfName, prev.IPs); err != nil {
			return fmt.Errorf("failed to check addresses of %s: %w", args.IfName, err)
		}
		if err := ip.ValidateExpectedRoute(prev.Routes); err != nil {
			return fmt.Errorf("failed to check routes of %s: %w", args.IfName, err)
		}
		return nil
	})
}

// macvtapStill says why the completed attachment att on datapath Macvtap
// can no longer be handed out again by a repeated ADD: its macvtap is gone
// (e.g. with its netns) or cannot be read. nil when it is still there.
func macvtapStill(att *state.Attachment) error {
	ok, err := macvtap.Exists(att.Netns, att.IfName)
	if err != nil {
		return fmt.Errorf("its macvtap %s in %s cannot be read (%v)", att.IfName, att.Netns, err)
	}
	if !ok {
		return fmt.Errorf("its macvtap %s is gone from %s, e.g. with its netns", att.IfName, att.Netns)
	}
	return nil
}
