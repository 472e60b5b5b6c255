package emulation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/libcni"

	"github.com/fastpath-io/fastpath/bench/topology"
)

// CleanupLeftovers removes what an earlier emulation with the same Prefix,
// HostIfPrefix and StateDir left behind when it was killed before Stop: it
// replays CNI DEL for every attachment in the CNI result cache (so the real
// plugin releases its veths and IPAM addresses), kills the processes still
// inside the leftover network namespaces (netservers), deletes those
// namespaces and the host veths, and empties the per-VM and per-pod
// directories. It prints one line per thing removed to out (nil: nowhere).
func CleanupLeftovers(ctx context.Context, opts Options, out io.Writer) error {
	if opts.Prefix == "" || len(opts.HostIfPrefix) < 2 || opts.StateDir == "" {
		return fmt.Errorf("failed to clean up leftovers: Prefix, HostIfPrefix (2+ characters) and StateDir are required")
	}
	if out == nil {
		out = io.Discard
	}
	log := &logger{w: out}
	if len(opts.CNIPath) == 0 {
		opts.CNIPath = []string{"/opt/cni/bin", "/usr/lib/cni"}
	}
	var errs []error
	cni := libcni.NewCNIConfigWithCacheDir(opts.CNIPath, cniCacheDir(opts.StateDir), nil)
	atts, err := cni.GetCachedAttachments("")
	if err != nil {
		errs = append(errs, fmt.Errorf("failed to read the CNI cache %s: %w", cniCacheDir(opts.StateDir), err))
	}
	for _, a := range atts {
		conf, err := libcni.NetworkPluginConfFromBytes(a.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to load the cached CNI configuration of %s: %w", a.Network, err))
			continue
		}
		rt := &libcni.RuntimeConf{ContainerID: a.ContainerID, NetNS: a.NetNS, IfName: a.IfName, Args: a.CniArgs, CapabilityArgs: a.CapabilityArgs}
		if err := cni.DelNetwork(ctx, conf, rt); err != nil {
			errs = append(errs, fmt.Errorf("failed to run CNI DEL of leftover %s (CNI_IFNAME %s, netns %s): %w", a.Network, a.IfName, a.NetNS, err))
			continue
		}
		log.printf("cleanup", "CNI DEL of leftover attachment %s (CNI_IFNAME=%s, %s)", a.Network, a.IfName, a.NetNS)
	}
	names, err := topology.ListNetNS(opts.Prefix)
	if err != nil {
		errs = append(errs, err)
	}
	for _, n := range names {
		if killed, err := topology.KillProcessesIn(filepath.Join(topology.NetNSDir, n)); err != nil {
			errs = append(errs, err)
		} else if killed > 0 {
			log.printf("cleanup", "killed %d leftover process(es) in network namespace %s", killed, n)
		}
		if err := topology.DeleteNetNS(n); err != nil {
			errs = append(errs, err)
			continue
		}
		log.printf("cleanup", "deleted leftover network namespace %s", n)
	}
	links, err := topology.ListHostLinks(opts.HostIfPrefix)
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range links {
		if err := topology.DeleteHostLink(l); err != nil {
			errs = append(errs, err)
			continue
		}
		log.printf("cleanup", "deleted leftover host link %s", l)
	}
	for _, d := range []string{"vms", "pods"} {
		if err := os.RemoveAll(filepath.Join(opts.StateDir, d)); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", filepath.Join(opts.StateDir, d), err))
		}
	}
	return errors.Join(errs...)
}
