package plugin

import (
	"context"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/hostlocal"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// CmdCheck verifies that the attachment is as ADD left it and as prevResult
// says: on the host, what its datapath checks there (the bridge or lower
// device MTU still large enough; for a veth its port on the bridge and its
// port security rules when ADD made them: datapath.Datapath.CheckDevice);
// the IPAM plugin's own CHECK; the pod interface as its datapath made it
// (CheckInterface: MTU, offloads, the container MAC; both veth ends and
// that they are peers); and the addresses and routes of prevResult.
func (p *Plugin) CmdCheck(args *skel.CmdArgs) error {
	conf, _, err := netconf.LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	if conf.RawPrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "prevResult is required for CHECK", "")
	}
	pc := &types.PluginConf{CNIVersion: conf.CNIVersion, RawPrevResult: conf.RawPrevResult}
	if err := version.ParsePrevResult(pc); err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("failed to parse prevResult: %v", err), "")
	}
	prev, err := current.NewResultFromResult(pc.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("failed to convert prevResult: %v", err), "")
	}
	var contIface *current.Interface
	for _, i := range prev.Interfaces {
		if i.Name == args.IfName && i.Sandbox != "" {
			contIface = i
		}
	}
	if contIface == nil {
		return fmt.Errorf("failed to check %s: prevResult lists no interface %s in a sandbox", args.IfName, args.IfName)
	}

	store, nodeLock, err := state.OpenLocked(conf.StateDir, false)
	if err != nil {
		return err
	}
	defer nodeLock.Unlock()
	att, err := store.Load(args.ContainerID, args.IfName)
	if err != nil {
		return fmt.Errorf("failed to check attachment %s/%s: %w", args.ContainerID, args.IfName, err)
	}
	if !att.Complete {
		return fmt.Errorf("failed to check attachment %s/%s: its ADD did not complete", args.ContainerID, args.IfName)
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	dp, err := p.open(ctx, conf)
	if err != nil {
		return err
	}
	defer dp.Close()
	if err := dp.CheckDevice(ctx, conf, att); err != nil {
		return err
	}
	ipamIn, err := checkIPAMInput(conf, att)
	if err != nil {
		return err
	}
	ipamArgs := hostlocal.Args{ContainerID: args.ContainerID, IfName: args.IfName, CNIArgs: args.Args}
	if err := ipamCheck(ctx, conf.IPAM.Type(), ipamIn, ipamArgs, newIPAMExec(nodeLock)); err != nil {
		return fmt.Errorf("failed to check addresses with IPAM plugin %s: %w", conf.IPAM.Type(), err)
	}
	netns, err := openNetNS(args.Netns)
	if err != nil {
		return err
	}
	defer netns.Close()
	if err := dp.CheckInterface(netns, conf, att, contIface.Mac); err != nil {
		return err
	}
	return netns.Do(func(ns.NetNS) error {
		if err := ip.ValidateExpectedInterfaceIPs(args.IfName, prev.IPs); err != nil {
			return fmt.Errorf("failed to check addresses of %s: %w", args.IfName, err)
		}
		if err := ip.ValidateExpectedRoute(prev.Routes); err != nil {
			return fmt.Errorf("failed to check routes of %s: %w", args.IfName, err)
		}
		return nil
	})
}

// checkLink checks that link is up with mtu and, when mac is not empty, that MAC.
func checkLink(link netlink.Link, mtu int, mac string) error {
	a := link.Attrs()
	if a.MTU != mtu {
		return fmt.Errorf("failed to check %s: MTU is %d, want %d", a.Name, a.MTU, mtu)
	}
	if a.Flags&net.FlagUp == 0 {
		return fmt.Errorf("failed to check %s: it is down", a.Name)
	}
	if mac != "" && a.HardwareAddr.String() != mac {
		return fmt.Errorf("failed to check %s: MAC is %s, want %s", a.Name, a.HardwareAddr, mac)
	}
	return nil
}
