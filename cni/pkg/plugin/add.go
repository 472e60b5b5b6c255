package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/hostlocal"
	"github.com/fastpath-io/fastpath/cni/pkg/portsec"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// CmdAdd wires the attachment args.ContainerID/args.IfName: the pod
// interface its datapath makes in args.Netns (a veth pair whose host end
// joins the bridge, or a macvtap on the lower device; see dispatch) with
// the MTU and offloads, and addresses from the IPAM plugin. It prints the
// CNI result in the netconf's version.
//
// It reads as one flow for every datapath: load the netconf and CNI_ARGS,
// lock the attachment, record it, start the IPAM plugin, create the
// interface (datapath.Datapath.Create) with one deferred rollback, apply
// port security, configure the addresses, record the result and print it.
//
// A repeated ADD of an attachment that an earlier ADD completed never
// touches it: the same request (netconf, CNI_NETNS and CNI_ARGS) gets the
// recorded result again, a different one an error (see repeatAdd). What an
// earlier ADD that died half-way left is reclaimed first (see reclaim). On
// any failure it undoes what this invocation created (IPAM allocation,
// port security rules, what Create made, state file) and nothing else.
//
// A pod outside the netconf's namespace (CNI_ARGS K8S_POD_NAMESPACE) is
// refused with CNI error 7 before anything is locked, recorded or created
// (netconf.NetConf.RequireNamespace).
func (p *Plugin) CmdAdd(args *skel.CmdArgs) (err error) {
	conf, cniVersion, err := netconf.LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	cniArgs, err := netconf.ParseArgs(args.Args)
	if err != nil {
		return err
	}
	if err := conf.RequireNamespace(cniArgs.PodNamespace()); err != nil {
		return err
	}
	mac, err := conf.ContainerMAC(cniArgs)
	if err != nil {
		return err
	}
	pod := cniArgs.Pod()
	locks, err := state.LockAttachment(conf.StateDir, args.ContainerID, args.IfName)
	if err != nil {
		return err
	}
	defer locks.Unlock()
	store, ipamEx := locks.Store, newIPAMExec(locks.Node, locks.Attachment)

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	prior, err := store.Load(args.ContainerID, args.IfName)
	switch {
	case err == nil && prior.Complete:
		return p.repeatAdd(prior, args, cniVersion)
	case err == nil:
		if prior.Datapath == netconf.DatapathOVS && p.ovs == nil {
			return p.handOver(args.StdinData, "reclaiming an unfinished ADD on datapath OVS")
		}
		if err := p.reclaim(ctx, ipamEx, store, prior); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("failed to add attachment %s/%s: its state file exists but cannot be read (%w): DEL it before adding it again",
			args.ContainerID, args.IfName, err)
	}
	dp, err := p.open(ctx, conf)
	if err != nil {
		return err
	}
	defer dp.Close()
	if err := dp.Prepare(ctx, conf); err != nil {
		return err
	}

	netns, err := openNetNS(args.Netns)
	if err != nil {
		return err
	}
	defer netns.Close()

	att := &state.Attachment{
		ContainerID: args.ContainerID, IfName: args.IfName, Netns: args.Netns, Network: conf.Name,
		Datapath: conf.Datapath, Bridge: conf.Bridge, MAC: mac,
		IPAMType: conf.IPAM.Type(), NetConf: args.StdinData, IPAMConf: conf.IPAMConf, Args: args.Args,
	}
	dp.Record(att)
	// Before anything is recorded or created: the addresses an earlier
	// plugin allocated for this network's running VMs are not to be
	// handed out again.
	if err := adoptLegacyAllocations(conf); err != nil {
		return err
	}
	// Record the attachment before creating anything, so that DEL and GC
	// find whatever a crash in the middle of this ADD leaves behind.
	if err := store.Save(att); err != nil {
		return err
	}
	// The IPAM plugin runs beside the interface set-up: neither needs the
	// other until the addresses are configured, and the IPAM plugin (its
	// file work and lock, and for any type but host-local an exec of a
	// process that does its own start-up) would otherwise wait for
	// RTNL-bound netlink work it does not depend on (docs/design.md §4.3
	// has both times). Its DEL is run on failure even when its ADD
	// failed (e.g. killed by the timeout half-way): no complete record of
	// this attachment exists, so whatever it holds for it is stale; the
	// rollback waits for its ADD first.
	ipamArgs := hostlocal.Args{ContainerID: args.ContainerID, IfName: args.IfName, CNIArgs: args.Args}
	ipamRun := startIPAM(ctx, conf.IPAM.Type(), conf.IPAMConf, ipamArgs, ipamEx)
	var undo func(context.Context) error
	var portsecMade bool
	defer func() {
		if err == nil {
			return
		}
		logger.Printf("Rolling back failed ADD container=%s ifname=%s error=%q", args.ContainerID, args.IfName, err)
		rctx, rcancel := context.WithTimeout(context.Background(), opTimeout)
		defer rcancel()
		_, _ = ipamRun.wait() // its ADD ended, with or without addresses
		if derr := ipamDel(rctx, conf.IPAM.Type(), conf.IPAMConf, ipamArgs, ipamEx); derr != nil {
			logger.Printf("Rollback failed to release addresses ipam=%s error=%q", conf.IPAM.Type(), derr)
		}
		if portsecMade {
			if derr := removePortSecurity(rctx, netns, att); derr != nil {
				logger.Printf("Rollback failed to remove port security port=%s error=%q", att.HostIfName, derr)
			}
		}
		if undo != nil {
			if derr := undo(rctx); derr != nil {
				logger.Printf("Rollback failed to remove the interface ifname=%s error=%q", args.IfName, derr)
			}
		}
		if derr := forget(store, args.ContainerID, args.IfName); derr != nil {
			logger.Printf("Rollback failed to remove state error=%q", derr)
		}
	}()

	if err = refuseRecordedMAC(store, att); err != nil {
		return err
	}
	var ifaces []*current.Interface
	ifaces, undo, err = dp.Create(ctx, netns, att, conf, pod)
	if err != nil {
		return err
	}

	r, err := ipamRun.wait()
	result, err := ipamResult(conf, r, err)
	if err != nil {
		return err
	}
	if conf.PortSecurityOn() {
		// Before the pod's containers start: until now only the kernel
		// sent anything from the container end. Recorded first, so that
		// DEL and GC remove what a crash in Apply may leave; appended to
		// the record (Update), not a new file (Save).
		att.PortSecurity = true
		if err := store.Update(att); err != nil {
			return err
		}
		portsecMade = true
		contMAC, err := net.ParseMAC(att.MAC)
		if err != nil {
			return fmt.Errorf("failed to parse MAC %q of %s: %w", att.MAC, args.IfName, err)
		}
		if err := applyPortSecurity(ctx, netns, att, portsec.Port{HostIf: att.HostIfName, MAC: contMAC, IPs: resultIPs(result)}); err != nil {
			return err
		}
	}
	if att.Datapath == netconf.DatapathLinuxBridge {
		// Removed by the rollback (forget) with the record.
		if err := writeLease(store, att, conf.MTU, result); err != nil {
			return err
		}
	}
	result.Interfaces = ifaces
	return completeAdd(netns, store, att, result, len(ifaces)-1, cniVersion)
}

// refuseRecordedMAC refuses a requested MAC (att.MAC, from CNI_ARGS or
// runtimeConfig) that another attachment on the same switch has in its
// record (issue 39, item 4): the same datapath and bridge (the Linux or OVS
// bridge, on OVS of the same OVSDB endpoint; the macvtap lower device).
// Each ADD saves its record before it looks, so of two ADDs racing for one
// MAC at least one sees the other; the switch itself knows a port's MAC
// only later or not at all (a Linux bridge's forwarding database while its
// guest talks, an OVS interface's attached-mac once its port is added, a
// macvtap's while it is up). A MAC the kernel chooses is recorded once the
// ADD completes; the datapath's Create checks it against the switch itself
// (linuxBridge.Attach, ovs.Bridge.Attach, macvtapDatapath.Create).
func refuseRecordedMAC(store *state.Store, att *state.Attachment) error {
	if att.MAC == "" {
		return nil
	}
	mac, err := net.ParseMAC(att.MAC)
	if err != nil {
		return fmt.Errorf("failed to parse MAC %q of %s: %w", att.MAC, att.IfName, err)
	}
	records, err := store.List()
	if err != nil {
		// Unreadable records are skipped: they name no port the switch
		// check would not find.
		logger.Printf("Reading attachment records for the MAC check error=%q", err)
	}
	for _, other := range records {
		if (other.ContainerID == att.ContainerID && other.IfName == att.IfName) || other.MAC == "" ||
			other.Datapath != att.Datapath || other.Bridge != att.Bridge || other.OVSSocket != att.OVSSocket {
			continue
		}
		if m, err := net.ParseMAC(other.MAC); err == nil && bytes.Equal(m, mac) {
			return datapath.MACTakenError(mac, switchName(att), recordedPort(other))
		}
	}
	return nil
}

// switchName names the device a's ports share, for errors: "bridge <name>"
// on the bridge datapaths, "macvtap lower device <name>" on Macvtap.
func switchName(a *state.Attachment) string {
	if a.Datapath == netconf.DatapathMacvtap {
		return "macvtap lower device " + a.Bridge
	}
	return "bridge " + a.Bridge
}

// recordedPort names the port of the recorded attachment a, for errors:
// its host veth, or on Macvtap its macvtap in the pod's namespace.
func recordedPort(a *state.Attachment) string {
	port := a.HostIfName
	if port == "" {
		port = a.IfName + " in " + a.Netns
	}
	return fmt.Sprintf("%s, of attachment %s/%s", port, a.ContainerID, a.IfName)
}

// resultIPs returns the addresses of result.
func resultIPs(result *current.Result) []net.IP {
	ips := make([]net.IP, 0, len(result.IPs))
	for _, ipc := range result.IPs {
		ips = append(ips, ipc.Address.IP)
	}
	return ips
}

// ipamResult is the result of the IPAM plugin's ADD (r, err) as a types/100
// Result with at least one IP.
func ipamResult(conf *netconf.NetConf, r types.Result, err error) (*current.Result, error) {
	if err != nil {
		return nil, fmt.Errorf("failed to allocate addresses with IPAM plugin %s: %w", conf.IPAM.Type(), err)
	}
	result, err := current.NewResultFromResult(r)
	if err != nil {
		return nil, fmt.Errorf("failed to convert result of IPAM plugin %s: %w", conf.IPAM.Type(), err)
	}
	if len(result.IPs) == 0 {
		return nil, fmt.Errorf("failed to allocate addresses with IPAM plugin %s: it returned no IP", conf.IPAM.Type())
	}
	return result, nil
}

// completeAdd ends an ADD of att on every datapath once its interface is
// made and result holds the IPAM plugin's addresses and the interfaces:
// it points the addresses at result.Interfaces[ifIndex] (the container
// interface att.IfName), configures them on it in netns, records the
// attachment as complete with result (state.Store.Complete) and prints
// result in cniVersion. An error leaves the record incomplete, for the
// caller's rollback.
func completeAdd(netns ns.NetNS, store *state.Store, att *state.Attachment, result *current.Result, ifIndex int, cniVersion string) error {
	for _, ipc := range result.IPs {
		ipc.Interface = current.Int(ifIndex)
	}
	if err := netns.Do(func(ns.NetNS) error { return ipam.ConfigureIface(att.IfName, result) }); err != nil {
		return fmt.Errorf("failed to configure addresses on %s in %s: %w", att.IfName, att.Netns, err)
	}
	var err error
	att.Result, err = json.Marshal(result)
	if err != nil {
		return fmt.Errorf("failed to encode result of attachment %s/%s: %w", att.ContainerID, att.IfName, err)
	}
	att.Complete = true
	if err := store.Complete(att); err != nil {
		return err
	}
	return types.PrintResult(result, cniVersion)
}

// ipamRun is an IPAM plugin's ADD running in its own goroutine.
type ipamRun struct {
	done   chan struct{}
	result types.Result
	err    error
}

// startIPAM runs the ADD of the IPAM plugin ipamType with stdin for args
// (ipamAdd: in this process for host-local, through ipamEx otherwise),
// bounded by ctx, and returns at once.
func startIPAM(ctx context.Context, ipamType string, stdin []byte, args hostlocal.Args, ipamEx *ipamExec) *ipamRun {
	r := &ipamRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.result, r.err = ipamAdd(ctx, ipamType, stdin, args, ipamEx)
	}()
	return r
}

// wait returns the IPAM plugin's result once its ADD has ended.
func (r *ipamRun) wait() (types.Result, error) {
	<-r.done
	return r.result, r.err
}

// repeatAdd answers an ADD of an attachment whose earlier ADD completed
// (att), without touching it. The same request (netconf equal as JSON,
// same CNI_NETNS and CNI_ARGS) whose host veth still exists gets the
// recorded result, converted to cniVersion; anything else is an error that
// says what differs and that DEL must come first. Its datapath says whether
// the interface is still there (datapath.Datapath.Exists).
func (p *Plugin) repeatAdd(att *state.Attachment, args *skel.CmdArgs, cniVersion string) error {
	key := att.ContainerID + "/" + att.IfName
	var differs []string
	if !sameJSON(att.NetConf, args.StdinData) {
		differs = append(differs, "network configuration")
	}
	if att.Netns != args.Netns {
		differs = append(differs, fmt.Sprintf("CNI_NETNS (%q, was %q)", args.Netns, att.Netns))
	}
	if att.Args != args.Args {
		differs = append(differs, "CNI_ARGS")
	}
	if len(differs) > 0 {
		return fmt.Errorf("attachment %s already exists (added %s) with another %s: left as it is; DEL it before adding it again",
			key, att.Created.Format(time.RFC3339), strings.Join(differs, ", "))
	}
	if len(att.Result) == 0 {
		return fmt.Errorf("attachment %s already exists (added %s) but its record holds no result to repeat: left as it is; DEL it before adding it again",
			key, att.Created.Format(time.RFC3339))
	}
	dp, err := p.recorded(att, nil)
	if err != nil {
		return err
	}
	defer dp.Close()
	if err := dp.Exists(att); err != nil {
		return fmt.Errorf("attachment %s already exists (added %s) but %v: left as it is; DEL it before adding it again",
			key, att.Created.Format(time.RFC3339), err)
	}
	result, err := current.NewResult(att.Result)
	if err != nil {
		return fmt.Errorf("failed to decode the recorded result of attachment %s: %w", key, err)
	}
	logger.Printf("Repeated ADD, returning the recorded result container=%s ifname=%s", att.ContainerID, att.IfName)
	return types.PrintResult(result, cniVersion)
}

// sameJSON reports whether a and b are the same JSON value (key order and
// white space aside).
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// reclaim undoes what an ADD that died before completing left of att (its
// record says Complete false): the addresses the IPAM plugin may hold for
// it (released with that ADD's netconf), its veth and bridge port, and the
// record. The caller holds the attachment's lock, so that ADD is not running.
// A plugin without OVS hands the ADD over before it reclaims an OVS record.
func (p *Plugin) reclaim(ctx context.Context, ipamEx *ipamExec, store *state.Store, att *state.Attachment) error {
	logger.Printf("Reclaiming what an unfinished ADD left container=%s ifname=%s created=%s",
		att.ContainerID, att.IfName, att.Created.Format(time.RFC3339Nano))
	if err := releaseAddresses(ctx, ipamEx, att); err != nil {
		return fmt.Errorf("failed to reclaim unfinished attachment %s/%s: %w", att.ContainerID, att.IfName, err)
	}
	if err := p.teardown(ctx, att, nil); err != nil {
		return fmt.Errorf("failed to reclaim unfinished attachment %s/%s: %w", att.ContainerID, att.IfName, err)
	}
	return forget(store, att.ContainerID, att.IfName)
}

// hostVethExists reports whether the host network namespace has a link
// named name.
func hostVethExists(name string) bool {
	_, err := netlinksafe.LinkByName(name)
	return err == nil
}

// applyPortSecurity installs p for attachment att: on datapath LinuxBridge
// the bridge port's rules in the host's bridge table, on datapath OVS the
// egress rules of the pod's interface inside netns (an OVS port is no Linux
// bridge port; see portsec.EgressTable).
func applyPortSecurity(ctx context.Context, netns ns.NetNS, att *state.Attachment, p portsec.Port) error {
	if att.Datapath != netconf.DatapathOVS {
		return portsec.Apply(ctx, p)
	}
	return netns.Do(func(ns.NetNS) error { return portsec.ApplyEgress(ctx, att.IfName, p) })
}

// removePortSecurity removes what applyPortSecurity installed; netns may be
// nil on datapath LinuxBridge. On datapath OVS a namespace that is gone took
// the rules with it.
func removePortSecurity(ctx context.Context, netns ns.NetNS, att *state.Attachment) error {
	if att.Datapath != netconf.DatapathOVS {
		return portsec.Remove(ctx, att.HostIfName)
	}
	if netns == nil {
		return nil
	}
	return netns.Do(func(ns.NetNS) error { return portsec.RemoveEgress(ctx, att.IfName) })
}

// writeLease records for the node agent's DHCPv4 responder what a guest
// behind att must be told (internal/node/leases): the first IPv4 address of
// result with its prefix, a router only when result has an IPv4 default
// route (defaultGateway4), and mtu; and the IPAM plugin and the network
// name it was given (the "name" of att's IPAM input: the bridge's
// allocator, netconf.IPAMNetworkName), so that the responder can ask that
// allocator whether the address is still att's. An attachment without IPv4
// address gets no lease.
func writeLease(store *state.Store, att *state.Attachment, mtu int, result *current.Result) error {
	var ipamIn struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(att.IPAMInput(), &ipamIn); err != nil {
		return fmt.Errorf("failed to decode the IPAM input of %s/%s: %w", att.ContainerID, att.IfName, err)
	}
	for _, ipc := range result.IPs {
		ip4 := ipc.Address.IP.To4()
		if ip4 == nil {
			continue
		}
		addr, _ := netip.AddrFromSlice(ip4)
		ones, _ := ipc.Address.Mask.Size()
		l := &leases.Lease{ContainerID: att.ContainerID, IfName: att.IfName, Network: att.Network, Bridge: att.Bridge,
			MAC: att.MAC, Address: netip.PrefixFrom(addr, ones), MTU: mtu, IPAMType: att.IPAMType, IPAMNetwork: ipamIn.Name}
		l.Gateway = defaultGateway4(result, ipc)
		return leases.Write(store.Dir(), l)
	}
	return nil
}

// defaultGateway4 is the router a guest on this network may be told: the
// gateway of result's IPv4 default route (or ipc's gateway when the route
// names none), and none without such a route. As KubeVirt's bridge binding
// does (pkg/network/dhcp: the router option comes from the pod interface's
// default route): a secondary network such as Fastpath's, whose IPAM hands
// out a gateway (host-local's .1) but no default route, must not take the
// guest's default route from its pod network, or replies to traffic that
// came in on the pod network leave through the fast path.
func defaultGateway4(result *current.Result, ipc *current.IPConfig) netip.Addr {
	for _, r := range result.Routes {
		if r == nil || r.Dst.IP.To4() == nil {
			continue
		}
		if ones, _ := r.Dst.Mask.Size(); ones != 0 || !r.Dst.IP.Equal(net.IPv4zero) {
			continue
		}
		gw := r.GW.To4()
		if gw == nil {
			gw = ipc.Gateway.To4()
		}
		if a, ok := netip.AddrFromSlice(gw); ok {
			return a
		}
	}
	return netip.Addr{}
}

// forget removes the attachment containerID/ifName's DHCP lease, then its
// record: a lease never outlives the record that lets DEL and GC find it.
func forget(store *state.Store, containerID, ifName string) error {
	if err := leases.Remove(store.Dir(), containerID, ifName); err != nil {
		return err
	}
	return store.Delete(containerID, ifName)
}
