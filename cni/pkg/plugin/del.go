package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/hostlocal"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// CmdDel undoes the attachment args.ContainerID/args.IfName: releases its
// addresses, deletes the veth pair, removes the OVS port and the state file.
// It is idempotent and succeeds when the netns, the veth or the state file is
// already gone. It waits for an OVSDB that does not answer up to opTimeout
// and then fails (code 11) keeping the state file: a DEL that succeeds is
// not called again and no GC is bound to follow, so it must not leave the
// OVS port behind; the runtime repeats a failed DEL.
func (p *Plugin) CmdDel(args *skel.CmdArgs) error {
	conf, _, err := netconf.LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	locks, err := state.LockAttachment(conf.StateDir, args.ContainerID, args.IfName)
	if err != nil {
		return err
	}
	defer locks.Unlock()
	store := locks.Store

	att, err := store.Load(args.ContainerID, args.IfName)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logger.Printf("Ignoring unreadable state, deleting by derived names container=%s ifname=%s error=%q", args.ContainerID, args.IfName, err)
		}
		att = &state.Attachment{ContainerID: args.ContainerID, IfName: args.IfName, Network: conf.Name, Netns: args.Netns,
			Datapath: conf.Datapath, Bridge: conf.Bridge, OVSSocket: conf.OVS.Socket,
			HostIfName: HostIfName(args.ContainerID, args.IfName), IPAMType: conf.IPAM.Type(), IPAMConf: conf.IPAMConf,
			// Without a record, rules are looked for only while the port is
			// there: a repeated DEL costs no nft run (GC finds the rest).
			PortSecurity: conf.PortSecurityOn() && hostVethExists(HostIfName(args.ContainerID, args.IfName))}
	}
	if att.Datapath == netconf.DatapathOVS && p.ovs == nil {
		// Recorded on OVS by an ADD whose network has since moved to another datapath.
		return p.handOver(args.StdinData, "deleting an attachment recorded on datapath OVS")
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// The addresses are released with the configuration their ADD gave the
	// IPAM plugin (its data directory and network name), which the record
	// keeps; without a record, with this DEL's.
	ipamArgs := hostlocal.Args{ContainerID: args.ContainerID, IfName: args.IfName, CNIArgs: args.Args}
	if err := ipamDel(ctx, att.IPAMType, att.IPAMInput(), ipamArgs, newIPAMExec(locks.Node, locks.Attachment)); err != nil {
		return fmt.Errorf("failed to release addresses with IPAM plugin %s: %w", att.IPAMType, err)
	}
	if in, ok, err := legacyIPAMInput(att); err != nil || ok {
		if err == nil {
			err = ipamDel(ctx, att.IPAMType, in, ipamArgs, newIPAMExec(locks.Node, locks.Attachment))
		}
		if err != nil {
			return fmt.Errorf("failed to release addresses in the bridge's allocator with IPAM plugin %s: %w", att.IPAMType, err)
		}
	}
	if err := p.teardown(ctx, att, nil); err != nil {
		return err
	}
	return forget(store, args.ContainerID, args.IfName) // and its lease, with a temporary file a killed ADD left
}

// teardown removes what the recorded attachment att has on the node with
// the datapath that made it (datapath.Datapath.Remove): the host veth, its
// port security rules and, for OVS, its port; on datapath Macvtap the
// macvtap in att.Netns (nothing when the netns is gone). On an error (e.g.
// OVSDB did not answer within ctx) the caller keeps the state file.
// clients may be nil.
func (p *Plugin) teardown(ctx context.Context, att *state.Attachment, clients ovsClients) error {
	dp, err := p.recorded(att, clients)
	if err != nil {
		return err
	}
	defer dp.Close()
	return dp.Remove(ctx, att)
}

// CmdGC (CNI 1.1) removes what belongs to attachments of this network that
// are not in cni.dev/valid-attachments: recorded attachments (addresses
// released through the IPAM plugin's DEL, veth, OVS port, state file), and
// bridge ports and veths that name such an attachment but have no state file
// (e.g. OVS ports that survived a reboot). It then delegates GC to the IPAM
// plugin, whose directory every attachment on the bridge shares
// (netconf.IPAMNetworkName): its valid attachments are this network's and
// every other network's recorded ones (ipamValid). It holds the node lock
// exclusively, so no ADD runs meanwhile.
func (p *Plugin) CmdGC(args *skel.CmdArgs) error {
	conf, _, err := netconf.LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	valid := map[types.GCAttachment]bool{}
	for _, a := range conf.ValidAttachments {
		valid[a] = true
	}
	store, nodeLock, err := state.OpenLocked(conf.StateDir, true)
	if err != nil {
		return err
	}
	defer nodeLock.Unlock()
	ipamEx := newIPAMExec(nodeLock)

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	clients := ovsClients{}
	defer clients.close()

	var errs []error
	// The node lock is held exclusively: no Save is under way, so every
	// temporary state file was stranded by a killed invocation.
	swept, err := store.SweepTemp(0)
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range swept {
		logger.Printf("GC removed stranded temporary state file file=%s", name)
	}
	atts, err := store.List()
	if err != nil {
		logger.Printf("Skipping unreadable state files error=%q", err)
	}
	if p.ovs == nil {
		for _, a := range atts {
			if a.Network == conf.Name && a.Datapath == netconf.DatapathOVS && !valid[types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName}] {
				// Recorded on OVS by an ADD whose network has since moved to another datapath.
				return p.handOver(args.StdinData, "collecting an attachment recorded on datapath OVS")
			}
		}
	}
	for _, a := range atts {
		if a.Network != conf.Name || valid[types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName}] {
			continue
		}
		logger.Printf("GC removing stale attachment container=%s ifname=%s port=%s", a.ContainerID, a.IfName, a.HostIfName)
		if err := releaseAddresses(ctx, ipamEx, a); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := p.teardown(ctx, a, clients); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := forget(store, a.ContainerID, a.IfName); err != nil {
			errs = append(errs, err)
		}
	}

	if err := sweepLeases(store.Dir(), conf.Name, valid); err != nil {
		errs = append(errs, err)
	}

	dp, err := p.open(ctx, conf)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer dp.Close()
	keep := func(port datapath.Port) bool {
		return valid[types.GCAttachment{ContainerID: port.ContainerID, IfName: port.IfName}]
	}
	// Only LinuxBridge ports have rules on the host; OVS's are in the pods'
	// namespaces, gone with them.
	if err := dp.Sweep(ctx, conf.Name, keep, conf.PortSecurityOn() && conf.Datapath == netconf.DatapathLinuxBridge); err != nil {
		errs = append(errs, err)
	}

	gcConf, err := ipamGCConf(conf, atts)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := delegateGC(ctx, ipamEx, conf.IPAM.Type(), gcConf); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ipamGCConf returns the IPAM plugin's GC input: conf.IPAMConf with
// cni.dev/valid-attachments holding the runtime's valid attachments of this
// network and every recorded attachment of another network (atts, read
// before this GC removed any). The runtime lists only this network's, and
// the IPAM plugin's directory is the bridge's (netconf.IPAMNetworkName),
// shared with the other attachments on it: without theirs it would release
// their addresses, and hand them out again.
func ipamGCConf(conf *netconf.NetConf, atts []*state.Attachment) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(conf.IPAMConf, &top); err != nil {
		return nil, fmt.Errorf("failed to decode the IPAM network configuration: %w", err)
	}
	valid := append([]types.GCAttachment{}, conf.ValidAttachments...)
	for _, a := range atts {
		if a.Network != conf.Name {
			valid = append(valid, types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName})
		}
	}
	raw, err := json.Marshal(valid)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the valid attachments: %w", err)
	}
	top["cni.dev/valid-attachments"] = raw
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the IPAM network configuration: %w", err)
	}
	return out, nil
}

// delegateGC runs the IPAM plugin's GC when the plugin speaks CNI 1.1.0 or
// later (GC is new in 1.1). An older plugin cannot collect garbage: it would
// take GC for an unknown command and fail, e.g. Debian bookworm's
// host-local v1.1.1 with "missing containerID". That is logged and not an
// error: the plugin's own cleanup above released the addresses of every
// recorded stale attachment through the IPAM plugin's DEL.
func delegateGC(ctx context.Context, ipamEx *ipamExec, ipamType string, stdin []byte) error {
	pluginPath, err := findPlugin(ipamType)
	if err != nil {
		return fmt.Errorf("failed to find IPAM plugin %s in CNI_PATH %q: %w", ipamType, os.Getenv("CNI_PATH"), err)
	}
	info, err := ipamEx.versionInfo(ctx, pluginPath)
	if err != nil {
		return fmt.Errorf("failed to ask IPAM plugin %s for its CNI versions: %w", ipamType, err)
	}
	if !supportsGC(info.SupportedVersions()) {
		logger.Printf("Skipping GC of IPAM plugin %s: it speaks CNI %s, GC needs 1.1.0", ipamType, strings.Join(info.SupportedVersions(), ", "))
		return nil
	}
	if err := ipamEx.delegate(ctx, "GC", ipamType, stdin); err != nil {
		return fmt.Errorf("failed to delegate GC to IPAM plugin %s: %w", ipamType, err)
	}
	return nil
}

// supportsGC reports whether one of versions is 1.1.0 or later.
func supportsGC(versions []string) bool {
	for _, v := range versions {
		if ok, err := version.GreaterThanOrEqualTo(v, "1.1.0"); err == nil && ok {
			return true
		}
	}
	return false
}

// releaseAddresses runs the IPAM plugin's DEL for a recorded attachment with
// the configuration and identity of its ADD (GC has no CNI_CONTAINERID), in
// this process for host-local (see ipamAdd).
func releaseAddresses(ctx context.Context, ipamEx *ipamExec, a *state.Attachment) error {
	if a.IPAMType == hostlocal.Type {
		args := hostlocal.Args{ContainerID: a.ContainerID, IfName: a.IfName}
		if err := hostlocal.Del(args, a.IPAMInput()); err != nil {
			return fmt.Errorf("failed to release addresses of %s/%s with IPAM plugin %s: %w", a.ContainerID, a.IfName, a.IPAMType, err)
		}
		in, ok, err := legacyIPAMInput(a)
		if err == nil && ok {
			err = hostlocal.Del(args, in)
		}
		if err != nil {
			return fmt.Errorf("failed to release addresses of %s/%s in the bridge's allocator with IPAM plugin %s: %w", a.ContainerID, a.IfName, a.IPAMType, err)
		}
		return nil
	}
	pluginPath, err := findPlugin(a.IPAMType)
	if err != nil {
		return fmt.Errorf("failed to find IPAM plugin %s in CNI_PATH %q: %w", a.IPAMType, os.Getenv("CNI_PATH"), err)
	}
	if err := ipamEx.execDel(ctx, pluginPath, a.IPAMInput(), a.ContainerID, a.Netns, a.IfName); err != nil {
		return fmt.Errorf("failed to release addresses of %s/%s with IPAM plugin %s: %w", a.ContainerID, a.IfName, a.IPAMType, err)
	}
	in, ok, err := legacyIPAMInput(a)
	if err == nil && ok {
		err = ipamEx.execDel(ctx, pluginPath, in, a.ContainerID, a.Netns, a.IfName)
	}
	if err != nil {
		return fmt.Errorf("failed to release addresses of %s/%s in the bridge's allocator with IPAM plugin %s: %w", a.ContainerID, a.IfName, a.IPAMType, err)
	}
	return nil
}

// sweepLeases removes the DHCP leases under stateDir of network's
// attachments that are not in valid. Those with a record went with it
// (forget); what is left lost its record (e.g. a state file gone after a
// crash of the node). The caller holds the node lock exclusively.
func sweepLeases(stateDir, network string, valid map[types.GCAttachment]bool) error {
	ls, err := leases.List(filepath.Join(stateDir, leases.Dir))
	if err != nil {
		logger.Printf("Skipping unreadable leases error=%q", err)
	}
	var errs []error
	for _, l := range ls {
		if l.Network != network || valid[types.GCAttachment{ContainerID: l.ContainerID, IfName: l.IfName}] {
			continue
		}
		logger.Printf("GC removing stale lease container=%s ifname=%s address=%s", l.ContainerID, l.IfName, l.Address)
		if err := leases.Remove(stateDir, l.ContainerID, l.IfName); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
