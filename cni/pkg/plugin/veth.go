package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/portsec"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
)

// vethDatapath is the datapath.Datapath of datapaths LinuxBridge and OVS:
// the pod interface is the container end of a veth pair whose host end
// (HostIfName) is a port of a datapath.Bridge, with the attachment's
// identity in its alias (hostAlias).
type vethDatapath struct {
	// name is the netconf "datapath"; ovsSocket the OVSDB endpoint as the
	// netconf gave it, recorded for datapath OVS only.
	name, ovsSocket string
	// connect opens the bridge; bridge calls it once. missing, when not
	// nil, is the error of a plugin binary built without the bridge's
	// datapath (errNoOVS).
	connect func(context.Context) (datapath.Bridge, error)
	missing error
	br      datapath.Bridge
	// owned says whether Close closes br (not a GC's shared connection).
	owned bool
}

// bridge returns the bridge, opened (for OVS: connected) on first use.
func (d *vethDatapath) bridge(ctx context.Context) (datapath.Bridge, error) {
	if d.missing != nil {
		return nil, d.missing
	}
	if d.br == nil {
		br, err := d.connect(ctx)
		if err != nil {
			return nil, err
		}
		d.br = br
	}
	return d.br, nil
}

// bridgeMTU returns the bridge and its MTU in bytes; a missing bridge is
// CNI error 11 (ErrTryAgainLater) naming the bridge and the node agent that
// creates it.
func (d *vethDatapath) bridgeMTU(ctx context.Context, conf *netconf.NetConf) (datapath.Bridge, int, error) {
	br, err := d.bridge(ctx)
	if err != nil {
		return nil, 0, err
	}
	mtu, err := br.BridgeMTU(ctx)
	if errors.Is(err, datapath.ErrBridgeMissing) {
		return nil, 0, datapath.BridgeMissingError(conf.Bridge, conf.Datapath, types.ErrTryAgainLater)
	}
	if err != nil {
		return nil, 0, err
	}
	return br, mtu, nil
}

// Prepare refuses an MTU above the bridge's and what the bridge's
// Preflight refuses.
func (d *vethDatapath) Prepare(ctx context.Context, conf *netconf.NetConf) error {
	br, bridgeMTU, err := d.bridgeMTU(ctx, conf)
	if err != nil {
		return err
	}
	if conf.MTU > bridgeMTU {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
			"mtu %d is larger than the MTU %d of bridge %s: lower the attachment mtu to at most %d or raise the bridge MTU (the node agent fastpath-agent sets it)",
			conf.MTU, bridgeMTU, conf.Bridge, bridgeMTU), "")
	}
	return br.Preflight(ctx, conf.Offloads.Map())
}

// Record names the host veth and, on OVS, the OVSDB endpoint.
func (d *vethDatapath) Record(a *state.Attachment) {
	a.HostIfName = HostIfName(a.ContainerID, a.IfName)
	if d.name == netconf.DatapathOVS {
		a.OVSSocket = d.ovsSocket
	}
}

// Create makes the veth pair from the pod's namespace in one request
// (setupVeth), applies the offloads to both ends and attaches the host end
// to the bridge. A host veth of its name that no complete record owns is a
// leftover of an earlier ADD of the attachment whose record is gone: it is
// deleted and the pair made again. undo detaches and deletes the host veth
// (which takes the container end with it).
func (d *vethDatapath) Create(ctx context.Context, netns ns.NetNS, a *state.Attachment, conf *netconf.NetConf, pod string) ([]*current.Interface, func(context.Context) error, error) {
	br, err := d.bridge(ctx)
	if err != nil {
		return nil, nil, err
	}
	hostIf := a.HostIfName
	alias := hostAlias(a.Network, a.ContainerID, a.IfName)
	undo := func(ctx context.Context) error {
		var errs []error
		if err := br.Detach(ctx, hostIf); err != nil {
			errs = append(errs, fmt.Errorf("failed to detach port %s: %w", hostIf, err))
		}
		if err := deleteHostVeth(hostIf, alias); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	var made bool
	var pair *vethPair
	var peer *offload.Peer
	makeVeth := func() error {
		return netns.Do(func(hostNS ns.NetNS) error {
			var err error
			pair, err = setupVeth(a.IfName, hostIf, conf.MTU, a.MAC, hostNS)
			if err != nil {
				return fmt.Errorf("failed to create veth pair %s/%s in %s: %w", a.IfName, hostIf, a.Netns, err)
			}
			made = true
			peer, err = offload.ApplyVeth(a.IfName, conf.Offloads.Map())
			return err
		})
	}
	err = makeVeth()
	if err != nil && !made && hostVethExists(hostIf) {
		// Looked for only now: each lookup waits for the RTNL lock.
		if err := deleteHostVeth(hostIf, alias); err != nil {
			return nil, nil, err
		}
		err = makeVeth()
	}
	if err != nil {
		if made {
			return nil, undo, err
		}
		return nil, nil, err
	}
	a.MAC = pair.cont.Attrs().HardwareAddr.String()
	// The host end by the index setupVeth read back: no lookup by name.
	host := datapath.HostEnd{Index: pair.hostIndex, Name: hostIf, Alias: alias}
	clearAcceptRA(hostIf)
	if err := peer.Apply(hostIf); err != nil {
		return nil, undo, err
	}
	if err := br.Attach(ctx, a, host, pod); err != nil {
		return nil, undo, err
	}
	return []*current.Interface{
		{Name: hostIf, Mac: pair.hostMAC.String(), Mtu: conf.MTU},
		{Name: a.IfName, Mac: a.MAC, Mtu: conf.MTU, Sandbox: a.Netns},
	}, undo, nil
}

// CheckDevice checks the bridge MTU, that the host veth is a port of the
// bridge and, when ADD made them, the port's port security rules.
func (d *vethDatapath) CheckDevice(ctx context.Context, conf *netconf.NetConf, a *state.Attachment) error {
	br, bridgeMTU, err := d.bridgeMTU(ctx, conf)
	if err != nil {
		return err
	}
	if conf.MTU > bridgeMTU {
		return fmt.Errorf("failed to check attachment: mtu %d is larger than the MTU %d of bridge %s", conf.MTU, bridgeMTU, conf.Bridge)
	}
	if err := br.Verify(ctx, a.HostIfName); err != nil {
		return err
	}
	if a.PortSecurity && a.Datapath != netconf.DatapathOVS { // OVS: CheckInterface, in the netns
		return portsec.Check(ctx, a.HostIfName)
	}
	return nil
}

// CheckInterface checks both veth ends: peers of each other, up, with the
// MTU and offloads, and the container end with mac.
func (d *vethDatapath) CheckInterface(netns ns.NetNS, conf *netconf.NetConf, a *state.Attachment, mac string) error {
	want := conf.Offloads.Map()
	var peerIndex int
	err := netns.Do(func(ns.NetNS) error {
		link, peer, err := ip.GetVethPeerIfindex(a.IfName)
		if err != nil {
			return fmt.Errorf("failed to check %s: %w", a.IfName, err)
		}
		peerIndex = peer
		if err := checkLink(link, conf.MTU, mac); err != nil {
			return err
		}
		if a.PortSecurity && a.Datapath == netconf.DatapathOVS {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			if err := portsec.CheckEgress(ctx, a.IfName); err != nil {
				return err
			}
		}
		return offload.Verify(a.IfName, want)
	})
	if err != nil {
		return err
	}
	host, err := netlinksafe.LinkByName(a.HostIfName)
	if err != nil {
		return fmt.Errorf("failed to check host veth %s: %w", a.HostIfName, err)
	}
	if host.Attrs().Index != peerIndex {
		return fmt.Errorf("failed to check host veth %s: its index %d is not the peer index %d of %s", a.HostIfName, host.Attrs().Index, peerIndex, a.IfName)
	}
	if err := checkLink(host, conf.MTU, ""); err != nil {
		return err
	}
	return offload.Verify(a.HostIfName, want)
}

// Exists looks for the host veth.
func (d *vethDatapath) Exists(a *state.Attachment) error {
	if _, err := netlinksafe.LinkByName(a.HostIfName); err != nil {
		return fmt.Errorf("its host veth %s is gone (%v), e.g. with its netns", a.HostIfName, err)
	}
	return nil
}

// Remove removes the port's port security rules, deletes the host veth and
// detaches the port. An OVSDB that does not answer within ctx (recorded
// keeps trying) fails it with code 11 (ErrTryAgainLater): the caller keeps
// the record, and the runtime's repeated DEL removes the port.
func (d *vethDatapath) Remove(ctx context.Context, a *state.Attachment) error {
	if a.PortSecurity && a.Datapath != netconf.DatapathOVS {
		// On OVS the rules are on the pod interface's egress, in its netns:
		// deleting the veth unhooks them and the netns takes them with it.
		if err := portsec.Remove(ctx, a.HostIfName); err != nil {
			return err
		}
	}
	if err := deleteHostVeth(a.HostIfName, hostAlias(a.Network, a.ContainerID, a.IfName)); err != nil {
		return err
	}
	if d.missing != nil {
		return d.missing // callers hand OVS records over first
	}
	br, err := d.bridge(ctx)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf(
			"failed to remove OVS port %s: %v; the attachment's record is kept until its port is removed", a.HostIfName, err), "")
	}
	return br.Detach(ctx, a.HostIfName)
}

// Sweep removes the bridge ports (and their host veths and port security
// rules) that name an attachment of network that keep does not hold.
func (d *vethDatapath) Sweep(ctx context.Context, network string, keep func(datapath.Port) bool, portSecurity bool) error {
	br, err := d.bridge(ctx)
	if err != nil {
		return err
	}
	var errs []error
	ports, err := br.Ports(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, port := range ports {
		if port.Network != network || keep(port) {
			continue
		}
		logger.Printf("GC removing stale port without state container=%s ifname=%s port=%s", port.ContainerID, port.IfName, port.HostIf)
		if portSecurity {
			if err := portsec.Remove(ctx, port.HostIf); err != nil {
				errs = append(errs, err)
			}
		}
		if err := deleteHostVeth(port.HostIf, hostAlias(port.Network, port.ContainerID, port.IfName)); err != nil {
			errs = append(errs, err)
		}
		if err := br.Detach(ctx, port.HostIf); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Status is the bridge's.
func (d *vethDatapath) Status(ctx context.Context) error {
	br, err := d.bridge(ctx)
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	return br.Status(ctx)
}

// Close closes the bridge when this datapath opened it.
func (d *vethDatapath) Close() {
	if d.br != nil && d.owned {
		d.br.Close()
	}
}
