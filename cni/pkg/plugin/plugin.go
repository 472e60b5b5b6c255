package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/cni/pkg/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/offload"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

// VersionInfo lists the CNI specification versions the plugin supports.
var VersionInfo = version.PluginSupports(netconf.SupportedVersions...)

// About is printed on stderr when the binary runs without CNI_COMMAND.
const About = "CNI plugin fastpath: node-local jumbo-frame network on a Linux bridge or Open vSwitch"

// Funcs returns the skel callbacks of the plugin, for skel.PluginMainFuncs.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add: keepContext(CmdAdd), Check: keepContext(CmdCheck), Del: keepContext(CmdDel),
		Status: keepContext(CmdStatus), GC: keepContext(CmdGC),
	}
}

// keepContext makes the CNI error that skel prints carry the whole message of
// an error that wraps a *types.Error (e.g. "failed to allocate addresses with
// IPAM plugin host-local: <its message>"): skel would print only the wrapped
// one. The code and details stay those of the wrapped error.
func keepContext(f func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) error {
		err := f(args)
		var cniErr *types.Error
		if err != nil && errors.As(err, &cniErr) && error(cniErr) != err {
			return types.NewError(cniErr.Code, err.Error(), cniErr.Details)
		}
		return err
	}
}

// opTimeout bounds the OVSDB and netlink work of one invocation; the OVS
// attach wait (ovsdb.AttachTimeout) is part of it.
const opTimeout = 60 * time.Second

// logger writes to stderr: stdout carries only the CNI result.
var logger = log.New(os.Stderr, "fastpath: ", log.LstdFlags|log.Lmicroseconds)

// cniArgs are the CNI_ARGS keys the plugin reads; the K8S_* keys are what
// kubelet and Multus pass (IgnoreUnknown=1 lets other keys through).
type cniArgs struct {
	types.CommonArgs
	MAC                        types.UnmarshallableString
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive,stylecheck // CNI_ARGS key
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive,stylecheck // CNI_ARGS key
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive,stylecheck // CNI_ARGS key
	K8S_POD_UID                types.UnmarshallableString //nolint:revive,stylecheck // CNI_ARGS key
}

// containerMAC returns the MAC address the container interface must get:
// runtimeConfig.mac (Multus "mac" capability) first, else CNI_ARGS MAC=,
// else "" (kernel-assigned). pod is "<namespace>/<name>" when kubelet passed them.
func containerMAC(conf *netconf.NetConf, rawArgs string) (mac, pod string, err error) {
	args := cniArgs{}
	if err := types.LoadArgs(rawArgs, &args); err != nil {
		return "", "", types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("failed to parse CNI_ARGS: %v", err), "")
	}
	if args.K8S_POD_NAME != "" {
		pod = string(args.K8S_POD_NAMESPACE) + "/" + string(args.K8S_POD_NAME)
	}
	if conf.RuntimeConfig != nil && conf.RuntimeConfig.MAC != "" {
		m, err := netconf.ParseMAC("runtimeConfig.mac", conf.RuntimeConfig.MAC)
		if err != nil {
			return "", "", err
		}
		return m.String(), pod, nil
	}
	if args.MAC != "" {
		m, err := netconf.ParseMAC("CNI_ARGS MAC", string(args.MAC))
		if err != nil {
			return "", "", err
		}
		return m.String(), pod, nil
	}
	return "", pod, nil
}

// lockedStore opens the state store under dir and takes its node lock (shared
// for ADD, CHECK and DEL; exclusive for GC). The caller must call unlock.
func lockedStore(dir string, exclusive bool) (_ *state.Store, unlock func(), err error) {
	store, err := state.New(dir)
	if err != nil {
		return nil, nil, err
	}
	unlock, err = store.Lock(exclusive)
	if err != nil {
		return nil, nil, err
	}
	return store, unlock, nil
}

// openBridge opens the datapath of conf and reads its bridge's MTU in bytes. A
// missing bridge is CNI error 11 (ErrTryAgainLater) naming the bridge and the
// node agent that creates it. On success the caller must close the datapath.
func openBridge(ctx context.Context, conf *netconf.NetConf) (datapath, int, error) {
	dp, err := openDatapath(ctx, conf)
	if err != nil {
		return nil, 0, err
	}
	mtu, err := dp.bridgeMTU(ctx)
	if err != nil {
		dp.close()
		if errors.Is(err, errBridgeMissing) {
			return nil, 0, bridgeMissingError(conf, types.ErrTryAgainLater)
		}
		return nil, 0, err
	}
	return dp, mtu, nil
}

// openNetNS opens CNI_NETNS; a bad path is CNI error 8 (ErrInvalidNetNS).
func openNetNS(path string) (ns.NetNS, error) {
	netns, err := ns.GetNS(path)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("failed to open netns %q: %v", path, err), "")
	}
	return netns, nil
}

// CmdAdd wires the attachment args.ContainerID/args.IfName: a veth pair with
// the container end in args.Netns and the host end on the bridge, MTU and
// offloads on both ends, addresses from the IPAM plugin. It prints the CNI
// result in the netconf's version. On any failure it undoes every step it
// took (IPAM allocation, bridge port, veth, state file) before returning.
func CmdAdd(args *skel.CmdArgs) (err error) {
	conf, cniVersion, err := netconf.LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	mac, pod, err := containerMAC(conf, args.Args)
	if err != nil {
		return err
	}
	store, unlock, err := lockedStore(conf.StateDir, false)
	if err != nil {
		return err
	}
	defer unlock()

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	dp, bridgeMTU, err := openBridge(ctx, conf)
	if err != nil {
		return err
	}
	defer dp.close()
	if conf.MTU > bridgeMTU {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
			"mtu %d is larger than the MTU %d of bridge %s: lower the attachment mtu to at most %d or raise the bridge MTU (the node agent fastpath-agent sets it)",
			conf.MTU, bridgeMTU, conf.Bridge, bridgeMTU), "")
	}
	if err := dp.preflight(ctx, conf); err != nil {
		return err
	}

	netns, err := openNetNS(args.Netns)
	if err != nil {
		return err
	}
	defer netns.Close()

	hostIf := HostIfName(args.ContainerID, args.IfName)
	alias := hostAlias(conf.Name, args.ContainerID, args.IfName)
	att := &state.Attachment{
		ContainerID: args.ContainerID, IfName: args.IfName, Netns: args.Netns, Network: conf.Name,
		Datapath: conf.Datapath, Bridge: conf.Bridge, HostIfName: hostIf, MAC: mac,
		IPAMType: conf.IPAM.Type(), NetConf: args.StdinData,
	}
	if conf.Datapath == netconf.DatapathOVS {
		att.OVSSocket = conf.OVS.Socket
	}
	// Record the attachment before creating anything, so that DEL and GC
	// find whatever a crash in the middle of this ADD leaves behind.
	if err := store.Save(att); err != nil {
		return err
	}
	var vethMade, ipamAdded bool
	defer func() {
		if err == nil {
			return
		}
		logger.Printf("Rolling back failed ADD container=%s ifname=%s error=%q", args.ContainerID, args.IfName, err)
		rctx, rcancel := context.WithTimeout(context.Background(), opTimeout)
		defer rcancel()
		if ipamAdded {
			if derr := ipam.ExecDel(conf.IPAM.Type(), args.StdinData); derr != nil {
				logger.Printf("Rollback failed to release addresses ipam=%s error=%q", conf.IPAM.Type(), derr)
			}
		}
		if vethMade {
			if derr := dp.detach(rctx, hostIf); derr != nil {
				logger.Printf("Rollback failed to detach port=%s error=%q", hostIf, derr)
			}
			if derr := deleteHostVeth(hostIf, alias); derr != nil {
				logger.Printf("Rollback failed to delete veth=%s error=%q", hostIf, derr)
			}
		}
		if derr := store.Delete(args.ContainerID, args.IfName); derr != nil {
			logger.Printf("Rollback failed to remove state error=%q", derr)
		}
	}()

	// A host veth of this name is a leftover of an earlier ADD of the same
	// attachment that never got its DEL (e.g. a crash): reclaim the name.
	if err := deleteHostVeth(hostIf, alias); err != nil {
		return err
	}
	var hostIface, contIface net.Interface
	err = netns.Do(func(hostNS ns.NetNS) error {
		var err error
		hostIface, contIface, err = ip.SetupVethWithName(args.IfName, hostIf, conf.MTU, mac, hostNS)
		if err != nil {
			return fmt.Errorf("failed to create veth pair %s/%s in %s: %w", args.IfName, hostIf, args.Netns, err)
		}
		vethMade = true
		return offload.Apply(args.IfName, conf.Offloads.Map())
	})
	if err != nil {
		return err
	}
	att.MAC = contIface.HardwareAddr.String()
	if err := setUpHostEnd(hostIf, alias, conf); err != nil {
		return err
	}
	if err := dp.attach(ctx, att, pod); err != nil {
		return err
	}

	r, err := ipam.ExecAdd(conf.IPAM.Type(), args.StdinData)
	if err != nil {
		return fmt.Errorf("failed to allocate addresses with IPAM plugin %s: %w", conf.IPAM.Type(), err)
	}
	ipamAdded = true
	result, err := current.NewResultFromResult(r)
	if err != nil {
		return fmt.Errorf("failed to convert result of IPAM plugin %s: %w", conf.IPAM.Type(), err)
	}
	if len(result.IPs) == 0 {
		return fmt.Errorf("failed to allocate addresses with IPAM plugin %s: it returned no IP", conf.IPAM.Type())
	}
	result.Interfaces = []*current.Interface{
		{Name: hostIf, Mac: hostIface.HardwareAddr.String(), Mtu: conf.MTU},
		{Name: args.IfName, Mac: att.MAC, Mtu: conf.MTU, Sandbox: args.Netns},
	}
	for _, ipc := range result.IPs {
		ipc.Interface = current.Int(1)
	}
	if err := netns.Do(func(ns.NetNS) error { return ipam.ConfigureIface(args.IfName, result) }); err != nil {
		return fmt.Errorf("failed to configure addresses on %s in %s: %w", args.IfName, args.Netns, err)
	}

	att.Complete = true
	if err := store.Save(att); err != nil {
		return err
	}
	return types.PrintResult(result, cniVersion)
}

// setUpHostEnd names the attachment in the host veth's alias and switches
// its offloads. Its MTU came with the pair.
func setUpHostEnd(hostIf, alias string, conf *netconf.NetConf) error {
	link, err := netlinksafe.LinkByName(hostIf)
	if err != nil {
		return fmt.Errorf("failed to look up host veth %s: %w", hostIf, err)
	}
	if alias != "" {
		if err := netlink.LinkSetAlias(link, alias); err != nil {
			return fmt.Errorf("failed to set alias of host veth %s: %w", hostIf, err)
		}
	}
	return offload.Apply(hostIf, conf.Offloads.Map())
}

// CmdCheck verifies that the attachment is as ADD left it and as prevResult
// says: both veth ends exist and are peers, MTU and offloads on both ends,
// the container MAC, addresses and routes, the host end on the bridge, the
// bridge MTU still large enough, and the IPAM plugin's own CHECK.
func CmdCheck(args *skel.CmdArgs) error {
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

	store, unlock, err := lockedStore(conf.StateDir, false)
	if err != nil {
		return err
	}
	defer unlock()
	att, err := store.Load(args.ContainerID, args.IfName)
	if err != nil {
		return fmt.Errorf("failed to check attachment %s/%s: %w", args.ContainerID, args.IfName, err)
	}
	if !att.Complete {
		return fmt.Errorf("failed to check attachment %s/%s: its ADD did not complete", args.ContainerID, args.IfName)
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	dp, bridgeMTU, err := openBridge(ctx, conf)
	if err != nil {
		return err
	}
	defer dp.close()
	if conf.MTU > bridgeMTU {
		return fmt.Errorf("failed to check attachment: mtu %d is larger than the MTU %d of bridge %s", conf.MTU, bridgeMTU, conf.Bridge)
	}
	if err := dp.verify(ctx, att.HostIfName); err != nil {
		return err
	}
	if err := ipam.ExecCheck(conf.IPAM.Type(), args.StdinData); err != nil {
		return fmt.Errorf("failed to check addresses with IPAM plugin %s: %w", conf.IPAM.Type(), err)
	}

	want := conf.Offloads.Map()
	netns, err := openNetNS(args.Netns)
	if err != nil {
		return err
	}
	defer netns.Close()
	var peerIndex int
	err = netns.Do(func(ns.NetNS) error {
		link, peer, err := ip.GetVethPeerIfindex(args.IfName)
		if err != nil {
			return fmt.Errorf("failed to check %s: %w", args.IfName, err)
		}
		peerIndex = peer
		if err := checkLink(link, conf.MTU, contIface.Mac); err != nil {
			return err
		}
		if err := offload.Verify(args.IfName, want); err != nil {
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
	if err != nil {
		return err
	}

	host, err := netlinksafe.LinkByName(att.HostIfName)
	if err != nil {
		return fmt.Errorf("failed to check host veth %s: %w", att.HostIfName, err)
	}
	if host.Attrs().Index != peerIndex {
		return fmt.Errorf("failed to check host veth %s: its index %d is not the peer index %d of %s", att.HostIfName, host.Attrs().Index, peerIndex, args.IfName)
	}
	if err := checkLink(host, conf.MTU, ""); err != nil {
		return err
	}
	return offload.Verify(att.HostIfName, want)
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

// CmdDel undoes the attachment args.ContainerID/args.IfName: releases its
// addresses, deletes the veth pair, removes the OVS port and the state file.
// It is idempotent and succeeds when the netns, the veth or the state file is
// already gone. When OVSDB does not answer it still succeeds (pod deletion
// must not hang on Open vSwitch) and keeps the state file, so that GC removes
// the port later.
func CmdDel(args *skel.CmdArgs) error {
	conf, _, err := netconf.LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	store, unlock, err := lockedStore(conf.StateDir, false)
	if err != nil {
		return err
	}
	defer unlock()

	att, err := store.Load(args.ContainerID, args.IfName)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logger.Printf("Ignoring unreadable state, deleting by derived names container=%s ifname=%s error=%q", args.ContainerID, args.IfName, err)
		}
		att = &state.Attachment{ContainerID: args.ContainerID, IfName: args.IfName, Network: conf.Name,
			Datapath: conf.Datapath, Bridge: conf.Bridge, OVSSocket: conf.OVS.Socket,
			HostIfName: HostIfName(args.ContainerID, args.IfName)}
	}

	if err := ipam.ExecDel(conf.IPAM.Type(), args.StdinData); err != nil {
		return fmt.Errorf("failed to release addresses with IPAM plugin %s: %w", conf.IPAM.Type(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	kept, err := teardown(ctx, att, hostAlias(att.Network, att.ContainerID, att.IfName), nil)
	if err != nil {
		return err
	}
	if kept {
		return nil
	}
	return store.Delete(args.ContainerID, args.IfName)
}

// ovsClients caches one OVSDB connection per endpoint during a GC.
type ovsClients map[string]*ovsdb.Client

func (m ovsClients) close() {
	for _, c := range m {
		c.Close()
	}
}

// teardown deletes the host veth of att and, for OVS, its port. It reports
// kept=true when OVSDB could not be reached, in which case the caller keeps
// the state file for a later GC. clients may be nil.
func teardown(ctx context.Context, att *state.Attachment, alias string, clients ovsClients) (kept bool, err error) {
	if err := deleteHostVeth(att.HostIfName, alias); err != nil {
		return false, err
	}
	if att.Datapath != netconf.DatapathOVS {
		return false, nil
	}
	socket := att.OVSSocket
	if socket == "" {
		socket = netconf.DefaultOVSSocket
	}
	c := clients[socket]
	if c == nil {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err = connectOVS(dctx, socket)
		if err != nil {
			logger.Printf("Keeping state for GC: cannot remove OVS port port=%s error=%q", att.HostIfName, err)
			return true, nil
		}
		if clients != nil {
			clients[socket] = c
		} else {
			defer c.Close()
		}
	}
	if err := c.DeletePort(ctx, att.HostIfName); err != nil {
		return false, err
	}
	return false, nil
}

// CmdGC (CNI 1.1) removes what belongs to attachments of this network that
// are not in cni.dev/valid-attachments: recorded attachments (addresses
// released through the IPAM plugin's DEL, veth, OVS port, state file), and
// bridge ports and veths that name such an attachment but have no state file
// (e.g. OVS ports that survived a reboot). It then delegates GC to the IPAM
// plugin. It holds the node lock exclusively, so no ADD runs meanwhile.
func CmdGC(args *skel.CmdArgs) error {
	conf, _, err := netconf.LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	valid := map[types.GCAttachment]bool{}
	for _, a := range conf.ValidAttachments {
		valid[a] = true
	}
	store, unlock, err := lockedStore(conf.StateDir, true)
	if err != nil {
		return err
	}
	defer unlock()

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	clients := ovsClients{}
	defer clients.close()

	var errs []error
	atts, err := store.List()
	if err != nil {
		logger.Printf("Skipping unreadable state files error=%q", err)
	}
	for _, a := range atts {
		if a.Network != conf.Name || valid[types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName}] {
			continue
		}
		logger.Printf("GC removing stale attachment container=%s ifname=%s port=%s", a.ContainerID, a.IfName, a.HostIfName)
		if err := releaseAddresses(ctx, a); err != nil {
			errs = append(errs, err)
			continue
		}
		kept, err := teardown(ctx, a, hostAlias(a.Network, a.ContainerID, a.IfName), clients)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !kept {
			if err := store.Delete(a.ContainerID, a.IfName); err != nil {
				errs = append(errs, err)
			}
		}
	}

	dp, err := openDatapath(ctx, conf)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer dp.close()
	ports, err := dp.ports(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range ports {
		if p.network != conf.Name || valid[types.GCAttachment{ContainerID: p.containerID, IfName: p.ifName}] {
			continue
		}
		logger.Printf("GC removing stale port without state container=%s ifname=%s port=%s", p.containerID, p.ifName, p.hostIf)
		if err := deleteHostVeth(p.hostIf, hostAlias(p.network, p.containerID, p.ifName)); err != nil {
			errs = append(errs, err)
		}
		if err := dp.detach(ctx, p.hostIf); err != nil {
			errs = append(errs, err)
		}
	}

	if err := invoke.DelegateGC(ctx, conf.IPAM.Type(), args.StdinData, nil); err != nil {
		errs = append(errs, fmt.Errorf("failed to delegate GC to IPAM plugin %s: %w", conf.IPAM.Type(), err))
	}
	return errors.Join(errs...)
}

// releaseAddresses runs the IPAM plugin's DEL for a recorded attachment with
// the configuration and identity of its ADD (GC has no CNI_CONTAINERID).
func releaseAddresses(ctx context.Context, a *state.Attachment) error {
	cniPath := os.Getenv("CNI_PATH")
	pluginPath, err := invoke.FindInPath(a.IPAMType, filepath.SplitList(cniPath))
	if err != nil {
		return fmt.Errorf("failed to find IPAM plugin %s in CNI_PATH %q: %w", a.IPAMType, cniPath, err)
	}
	args := &invoke.Args{Command: "DEL", ContainerID: a.ContainerID, NetNS: a.Netns, IfName: a.IfName, Path: cniPath}
	if err := invoke.ExecPluginWithoutResult(ctx, pluginPath, a.NetConf, args, nil); err != nil {
		return fmt.Errorf("failed to release addresses of %s/%s with IPAM plugin %s: %w", a.ContainerID, a.IfName, a.IPAMType, err)
	}
	return nil
}

// CmdStatus (CNI 1.1) reports whether the plugin can serve ADD: the state
// directory is usable, the bridge exists (and, for OVS, OVSDB answers), and
// the IPAM plugin's own STATUS. Errors carry code 50 (ErrPluginNotAvailable)
// or 51 (ErrLimitedConnectivity, e.g. a Linux bridge that is down).
func CmdStatus(args *skel.CmdArgs) error {
	conf, _, err := netconf.LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	if _, err := state.New(conf.StateDir); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dp, err := openDatapath(ctx, conf)
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	defer dp.close()
	if err := dp.status(ctx); err != nil {
		return err
	}
	if err := ipam.ExecStatus(conf.IPAM.Type(), args.StdinData); err != nil {
		var cniErr *types.Error
		if errors.As(err, &cniErr) && (cniErr.Code == types.ErrPluginNotAvailable || cniErr.Code == types.ErrLimitedConnectivity) {
			return cniErr
		}
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("IPAM plugin %s is not available: %v", conf.IPAM.Type(), err), "")
	}
	return nil
}
