package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// teardown is what Down found to remove; it is written to
// <Dir>/logs/teardown.json so that Leftovers can check each item is gone.
type teardown struct {
	Processes []runstate.Process `json:"processes"`
	// NetNS are the pod sandboxes' network namespaces (bind mounts under
	// /run/netns that containerd 1.6 makes).
	NetNS []string `json:"netns"`
	// Sandboxes are the pod sandboxes' IDs: containerd's CNI result cache
	// (/var/lib/cni/results/<network>-<id>-<ifname>) is removed for them when
	// a CNI DEL failed.
	Sandboxes []string `json:"sandboxes"`
	// ShimSockets are the shims' sockets under /run/containerd/s, where
	// containerd 1.6 puts them whatever its state directory.
	ShimSockets []string `json:"shimSockets"`
	// Bridges are the pod network's bridge and the Linux bridges the agent
	// made on this node (FastPathNode status, agent's marker).
	Bridges []string `json:"bridges"`
	// IPAMDirs are host-local's directories (/var/lib/cni/networks/<network>)
	// of the cluster's NetworkAttachmentDefinitions, removed once they hold no
	// address.
	IPAMDirs []string `json:"ipamDirs"`
	// DevicePluginDirs are the kubelet's device plugin directories Up saw
	// made (DevicePluginDir is fixed, outside Dir).
	DevicePluginDirs []string `json:"devicePluginDirs,omitempty"`
	// KubeVirtDirs are the directories Up made for KubeVirt; SharedMounts
	// the bind mounts it made on them.
	KubeVirtDirs []string `json:"kubevirtDirs,omitempty"`
	SharedMounts []string `json:"sharedMounts,omitempty"`
	// RootMadeShared: the root mount was private before Up and is again.
	RootMadeShared bool `json:"rootMadeShared,omitempty"`
	// Sysctls are the kernel settings restored.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// NFTables are the nftables tables that existed before the kubelet.
	NFTables []string `json:"nftTables"`
	// MarkedLeft are the links and OVS bridges carrying the agent's marks
	// that Down found left (marks.go): on the host since Up, or in a node
	// where no agent ran. Down fails naming them and removes none.
	MarkedLeft []string `json:"markedLeft,omitempty"`
	// NodeMarkedLinks are the marked links of nodes where the agent still
	// ran, per node: they went with the node's network namespace.
	NodeMarkedLinks []string `json:"nodeMarkedLinks,omitempty"`
	// Removed is everything removed, in order, for the report.
	Removed []string `json:"removed"`
}

// Down stops the cluster in opts.Dir and removes everything it made: the
// kubelet and kube-proxy first; then every pod sandbox through containerd's
// CRI (stopping containers and running CNI DEL through Multus, so veths and
// addresses go); containerd, its shims and any process left in the pods'
// cgroups; the control plane; mounts under Dir and the sandboxes' network
// namespaces; the cgroups under CgroupRoot; the pod bridge and the agent's
// bridges; kube-proxy's nftables tables; shim sockets; the kubelet's
// /var/log/containers links; and it restores the kernel settings the kubelet
// changed. Dir keeps only logs/ (with teardown.json). Down is idempotent and
// works after a killed Up. It returns the errors of the steps that failed,
// after trying all of them.
func Down(ctx context.Context, opts Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	l := o.layout()
	st, err := runstate.Load[runState](l.state)
	if err != nil {
		return err
	}
	if st.KubeVirt { // the kubelet's root was KubeVirtKubeletRoot
		o.KubeVirt = true
		l = o.layout()
	}
	d := &downer{o: o, l: l, st: st, agentCgroup: CgroupRoot, td: teardown{Sysctls: st.Sysctls, NFTables: st.NFTables, DevicePluginDirs: st.DevicePluginDirs,
		KubeVirtDirs: st.KubeVirtDirs, SharedMounts: st.SharedMounts, RootMadeShared: st.RootMadeShared}}
	start := time.Now()
	d.run(ctx)
	if err := os.MkdirAll(l.logs, 0o755); err == nil {
		b, _ := json.MarshalIndent(d.td, "", "  ")
		_ = os.WriteFile(filepath.Join(l.logs, "teardown.json"), b, 0o644)
	}
	fmt.Fprintf(o.Out, "cluster: down in %.1fs\n", time.Since(start).Seconds())
	return errors.Join(d.errs...)
}

type downer struct {
	o    Options
	l    layout
	st   runState
	td   teardown
	errs []error
	// agentCgroup is where the cluster's agents run (CgroupRoot; the
	// tests' stand-in agents run elsewhere).
	agentCgroup string
}

func (d *downer) step(name string, f func() error) {
	start := time.Now()
	err := f()
	status := "ok"
	if err != nil {
		status = "FAILED: " + err.Error()
		d.errs = append(d.errs, fmt.Errorf("%s: %w", name, err))
	}
	fmt.Fprintf(d.o.Out, "cluster: %-72s %6.1fs %s\n", name, time.Since(start).Seconds(), status)
}

func (d *downer) proc(name string) (runstate.Process, bool) {
	for _, p := range d.st.Processes {
		if p.Name == name {
			return p, true
		}
	}
	return runstate.Process{}, false
}

func (d *downer) stopProc(name string, grace time.Duration) error {
	p, ok := d.proc(name)
	if !ok {
		return nil
	}
	d.td.Processes = append(d.td.Processes, p)
	return p.Stop(grace)
}

func (d *downer) run(ctx context.Context) {
	if len(d.st.Nodes) > 0 || d.st.NodesBridge != "" {
		d.runNodes(ctx)
		return
	}
	nodeName := d.st.NodeName
	if nodeName == "" {
		nodeName = d.o.NodeName
	}
	d.td.Bridges = []string{PodBridge}
	// The agent's bridges are the cluster's to remove only while Fastpath
	// is installed (an agent runs): after an uninstall they are what its
	// cleanup left, which checkHost names.
	agentRuns := agentRunsIn(os.Getpid(), d.agentCgroup)
	if p, ok := d.proc("kube-apiserver"); ok && p.Alive() {
		d.step(fmt.Sprintf("agent bridges from FastPathNode %s (agent running: %t), host-local directories of the NADs", nodeName, agentRuns), func() error {
			var br []string
			var err error
			if agentRuns {
				br, err = agentBridges(ctx, d.l.adminKubeconfig, nodeName)
			}
			d.td.Bridges = append(d.td.Bridges, br...)
			dirs, derr := nadIPAMDirs(ctx, d.l.adminKubeconfig)
			d.td.IPAMDirs = dirs
			return errors.Join(err, derr)
		})
	}
	// NADs deleted before Down (with their namespace) leave their
	// directories too: the fastpath networks' (fp-*) made since Up.
	if d.st.IPAMBefore != nil {
		for _, dir := range ipamDirs() {
			if strings.HasPrefix(filepath.Base(dir), "fp-") && !slices.Contains(d.st.IPAMBefore, dir) && !slices.Contains(d.td.IPAMDirs, dir) {
				d.td.IPAMDirs = append(d.td.IPAMDirs, dir)
			}
		}
	}
	d.step("stop kube-proxy and the kubelet", func() error {
		return errors.Join(d.stopProc("kube-proxy", 10*time.Second), d.stopProc("kubelet", 20*time.Second))
	})
	if p, ok := d.proc("containerd"); ok && p.Alive() {
		d.step("remove every pod sandbox (CRI: stop, CNI DEL, remove)", func() error { return d.removePods(ctx) })
	}
	d.step("stop containerd and its shims", func() error {
		err := d.stopProc("containerd", 20*time.Second)
		d.td.ShimSockets = append(d.td.ShimSockets, d.shimSockets()...)
		for _, pid := range runstate.WithArg("containerd-shim-runc-v2", d.l.containerdSock) {
			if exe, start, ok := runstate.Identity(pid); ok {
				r := runstate.Process{Name: "containerd-shim-runc-v2", PID: pid, Exe: exe, Start: start}
				d.td.Processes = append(d.td.Processes, r)
				err = errors.Join(err, r.Stop(5*time.Second))
			}
		}
		return err
	})
	d.step("kill what is left in the pods' cgroups", d.killCgroupProcs)
	d.step("stop the registry, kube-scheduler, kube-controller-manager, kube-apiserver, etcd", func() error {
		return errors.Join(d.stopProc("registry", 10*time.Second), d.stopProc("kube-scheduler", 10*time.Second), d.stopProc("kube-controller-manager", 10*time.Second),
			d.stopProc("kube-apiserver", 20*time.Second), d.stopProc("etcd", 10*time.Second))
	})
	d.step("unmount under "+d.l.dir+", "+d.l.run+" and the pods' network namespaces", d.unmount)
	d.step("remove the cgroups under "+CgroupRoot, d.removeCgroups)
	d.step("remove links "+strings.Join(d.td.Bridges, ", "), d.removeLinks)
	d.step("look for links and OVS bridges with the agent's marks left on the host", d.checkHost(ctx))
	d.step("remove kube-proxy's nftables tables", d.removeNFTables)
	if d.st.NFTables != nil {
		d.step("remove the kubelet's iptables chains (and the tables it made)", func() error { return removeKubeletIPTables(d.st.NFTables) })
	}
	d.step("remove shim sockets and /var/log/containers links", d.removeHostFiles)
	d.restoreKernelSettings()
	d.step("remove "+d.l.run+" and "+d.l.dir+" (keeping logs/)", d.removeDir)
	if len(d.st.KubeVirtDirs) > 0 {
		d.step("remove "+strings.Join(d.st.KubeVirtDirs, ", ")+" (made for KubeVirt)", d.removeKubeVirtDirs)
	}
	if d.st.RootMadeShared {
		d.step("make the root mount private again, as it was before Up", func() error {
			if err := unix.Mount("", "/", "", unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("failed to make / private: %w", err)
			}
			d.td.Removed = append(d.td.Removed, "shared propagation of /")
			return nil
		})
	}
}

// restoreKernelSettings is Down's step that writes back the kernel settings
// the kubelets changed (recorded by Up in the run state), when there are any.
func (d *downer) restoreKernelSettings() {
	if len(d.st.Sysctls) == 0 {
		return
	}
	d.step("restore the kernel settings the kubelets changed", func() error {
		if failed := restoreSysctls(d.st.Sysctls); len(failed) > 0 {
			return fmt.Errorf("not restored: %s", strings.Join(failed, "; "))
		}
		return nil
	})
}

// agentBridges returns the Linux bridges and macvtap lower devices
// FastPathNode nodeName reports as the agent's, which the agent made for
// FastPathNetworks.
func agentBridges(ctx context.Context, kubeconfig, nodeName string) ([]string, error) {
	c, err := adminClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n := &fastpathv1alpha1.FastPathNode{}
	if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, n); err != nil {
		if client.IgnoreNotFound(err) == nil || apimeta.IsNoMatchError(err) || discovery.IsGroupDiscoveryFailedError(err) || strings.Contains(err.Error(), "no matches for") {
			return nil, nil // Fastpath is not installed
		}
		return nil, err
	}
	var out []string
	for _, b := range n.Status.Bridges {
		// A macvtap lower device is a marked veth: deleting it deletes its peer.
		if b.Datapath == fastpathv1alpha1.DatapathLinuxBridge || b.Datapath == fastpathv1alpha1.DatapathMacvtap {
			out = append(out, b.Name)
		}
	}
	return out, nil
}

// removePods records the sandboxes' network namespaces and removes every pod
// sandbox with crictl (stop: containers stopped, CNI DEL; remove).
func (d *downer) removePods(ctx context.Context) error {
	ids, err := d.o.crictl(ctx, "pods", "-q")
	if err != nil {
		return err
	}
	d.td.Sandboxes = append(d.td.Sandboxes, strings.Fields(string(ids))...)
	for _, id := range strings.Fields(string(ids)) {
		out, err := d.o.crictl(ctx, "inspectp", "-o", "json", id)
		if err != nil {
			continue
		}
		var info struct {
			Info struct {
				RuntimeSpec struct {
					Linux struct {
						Namespaces []struct{ Type, Path string }
					}
				}
			}
		}
		if json.Unmarshal(out, &info) == nil {
			for _, ns := range info.Info.RuntimeSpec.Linux.Namespaces {
				if ns.Type == "network" && (strings.HasPrefix(ns.Path, "/var/run/netns/") || strings.HasPrefix(ns.Path, "/run/netns/")) {
					d.td.NetNS = append(d.td.NetNS, ns.Path)
				}
			}
		}
	}
	if len(strings.Fields(string(ids))) == 0 {
		return nil
	}
	if _, err := d.o.crictl(ctx, "rmp", "-a", "-f"); err != nil {
		// A failed CNI DEL keeps a sandbox: its network namespace and CNI
		// cache are removed below, its veth with the bridge.
		return err
	}
	d.td.Removed = append(d.td.Removed, fmt.Sprintf("%d pod sandboxes", len(strings.Fields(string(ids)))))
	return nil
}

// shimSockets returns the sockets of the shims of this cluster's containerd,
// read from their task bundles' address files.
func (d *downer) shimSockets() []string {
	var out []string
	files, _ := filepath.Glob(filepath.Join(d.l.containerdState, "io.containerd.runtime.v2.task", "*", "*", "address"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		a := strings.TrimPrefix(strings.TrimSpace(string(b)), "unix://")
		if strings.HasPrefix(a, "/run/containerd/s/") {
			out = append(out, a)
		}
	}
	return out
}

// cgroupDirs returns CgroupRoot's directory in every mounted v1 hierarchy
// that has it.
func cgroupDirs() []string {
	var out []string
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		p := filepath.Join("/sys/fs/cgroup", e.Name(), CgroupRoot)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

// killCgroupProcs SIGKILLs every process in the cgroups under CgroupRoot (a
// container whose shim died with it would otherwise live on).
func (d *downer) killCgroupProcs() error {
	var pids []int
	for _, root := range cgroupDirs() {
		_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(pids) > 0 {
		d.td.Removed = append(d.td.Removed, fmt.Sprintf("%d processes in the pods' cgroups", len(pids)))
	}
	return nil
}

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dirs ...string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		for _, dir := range dirs {
			if mp == dir || strings.HasPrefix(mp, dir+"/") {
				out = append(out, mp)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (d *downer) unmount() error {
	targets := mountsUnder(append([]string{d.l.dir, d.l.run}, d.st.SharedMounts...)...)
	for _, ns := range d.td.NetNS {
		targets = append(targets, mountsUnder(ns)...)
	}
	var errs []error
	for _, mp := range targets {
		if err := syscall.Unmount(mp, 0); err != nil {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("failed to unmount %s: %w", mp, err))
				continue
			}
		}
		d.td.Removed = append(d.td.Removed, "mount "+mp)
	}
	for _, ns := range d.td.NetNS {
		if err := os.Remove(ns); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", ns, err))
		}
	}
	if left := mountsUnder(append([]string{d.l.dir, d.l.run}, d.st.SharedMounts...)...); len(left) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %s", strings.Join(left, ", ")))
	}
	return errors.Join(errs...)
}

// removeCgroups removes the cgroups under CgroupRoot, deepest first (a
// cgroup v1 directory is removed with rmdir once it has no process and no
// child).
func (d *downer) removeCgroups() error {
	var errs []error
	for _, root := range cgroupDirs() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, p := range dirs {
			var err error
			for i := 0; i < 50; i++ { // a just-killed process may take a moment to leave
				if err = syscall.Rmdir(p); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("failed to remove cgroup %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeLinks deletes the pod bridge and the agent's Linux bridges and
// macvtap lower devices (only those carrying the agent's marker) and any
// veth still enslaved to them.
func (d *downer) removeLinks() error {
	var errs []error
	for _, name := range d.td.Bridges {
		br, err := netlink.LinkByName(name)
		if err != nil {
			continue
		}
		if name != PodBridge && !strings.HasPrefix(br.Attrs().Alias, wellknown.MarkerKey+"=") {
			continue // not made by an agent: never touch it
		}
		if err := removeBridgeWithPorts(br); err != nil {
			errs = append(errs, fmt.Errorf("failed to delete link %s: %w", name, err))
			continue
		}
		d.td.Removed = append(d.td.Removed, "link "+name)
	}
	return errors.Join(errs...)
}

// kubeProxyTables are the nftables tables kube-proxy's nftables mode makes.
var kubeProxyTables = [][2]string{{"ip", "kube-proxy"}, {"ip6", "kube-proxy"}}

func (d *downer) removeNFTables() error {
	var errs []error
	for _, t := range kubeProxyTables {
		if exec.Command("nft", "list", "table", t[0], t[1]).Run() != nil {
			continue
		}
		if out, err := exec.Command("nft", "delete", "table", t[0], t[1]).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("nft delete table %s %s: %w: %s", t[0], t[1], err, out))
			continue
		}
		d.td.Removed = append(d.td.Removed, "nftables table "+t[0]+" "+t[1])
	}
	return errors.Join(errs...)
}

// removeDir removes the run directory and everything in Dir but logs/,
// unless a mount is left under either (then nothing is removed: the mount
// could reach outside).
func (d *downer) removeDir() error {
	if left := mountsUnder(d.l.dir, d.l.run); len(left) > 0 {
		return fmt.Errorf("not removed: still mounted: %s", strings.Join(left, ", "))
	}
	if err := os.RemoveAll(d.l.run); err != nil {
		return err
	}
	ents, err := os.ReadDir(d.l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if e.Name() == "logs" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(d.l.dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
