package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// A cluster of Options.Nodes > 1 runs each node in namespaces of its own,
// as kind runs nodes in containers: the control plane stays on the host;
// each node's containerd, kubelet and kube-proxy run under a node init
// (NodeInit, PID 1 of the node's PID namespace) in the node's own network,
// mount, UTS and PID namespaces, with its own cgroup root. The nodes and
// the host meet on NodesBridge; the pod network is routed between the
// nodes' pod CIDRs by static routes (each node's /24 of PodCIDR through its
// node address), the job kind's small route daemon does.
const (
	// MaxNodes is the most nodes Up starts (make cluster NODES=).
	MaxNodes = 3
	// NodesBridge is the host's bridge the nodes' uplinks are ports of.
	NodesBridge = "fpnodes0"
	// NodeUplink is each node's interface on NodesBridge, inside the node.
	NodeUplink = "eth0"
)

// NodesCIDR is the network of NodesBridge: the host (the control plane's
// address) is .1, node i (from 1) is .10+i.
var NodesCIDR = netip.MustParsePrefix("10.89.0.0/24")

// nodeState is a node of a multi-node cluster as Up records it.
type nodeState struct {
	Name    string       `json:"name"`
	IP      netip.Addr   `json:"ip"`
	PodCIDR netip.Prefix `json:"podCIDR"`
	// HostLink is the host end of the node's uplink (a port of NodesBridge).
	HostLink string `json:"hostLink"`
	// Init is the node's init process (host PID): the node lives as long
	// as it does.
	Init runstate.Process `json:"init"`
}

// nodePlan returns the nodes of a cluster of n nodes: node<i>, at
// NodesCIDR's .10+i, with the i-th /24 of podCIDR.
func nodePlan(n int, podCIDR netip.Prefix) []nodeState {
	base := NodesCIDR.Masked().Addr().As4()
	pod := podCIDR.Masked().Addr().As4()
	var out []nodeState
	for i := 1; i <= n; i++ {
		ip := base
		ip[3] = byte(10 + i)
		p := pod
		p[2] = byte(i)
		out = append(out, nodeState{
			Name: fmt.Sprintf("node%d", i), IP: netip.AddrFrom4(ip),
			PodCIDR: netip.PrefixFrom(netip.AddrFrom4(p), 24), HostLink: fmt.Sprintf("fpnode%d", i),
		})
	}
	return out
}

// plannedNodes are the nodes of a multi-node cluster; none for one node.
func (o Options) plannedNodes() []nodeState {
	if o.Nodes < 2 {
		return nil
	}
	return nodePlan(o.Nodes, o.PodCIDR)
}

// hostAddr is the host's (the control plane's) address on NodesBridge.
func hostAddr() netip.Addr { return NodesCIDR.Masked().Addr().Next() }

// nodeOptions are the Options a node's files and daemons are made from:
// its name, address and pod CIDR; its own directory (<Dir>/nodes/<name>:
// containerd, configuration, certificates, pod logs) while the CNI
// directories stay at the cluster's paths, bound per node (the chart
// gives every node's agent the same paths); the kubelet's root is
// KubeVirtKubeletRoot, in the node's own /var/lib.
func (o Options) nodeOptions(n nodeState) Options {
	no := o
	no.clusterDir = o.Dir
	no.Dir = filepath.Join(o.Dir, "nodes", n.Name)
	no.NodeName, no.NodeIP, no.PodCIDR = n.Name, n.IP, n.PodCIDR
	no.KubeVirt = true
	return no
}

// nodeBinds are the [source, target] pairs of node n's directories (under
// <Dir>/nodes/<name>) bound over the node's paths: its own /var/lib (the kubelet's root, libcni's cache,
// host-local's addresses, KubeVirt's state), /var/log and the cluster's CNI
// directory.
func (o Options) nodeBinds(n nodeState) [][2]string {
	nd := filepath.Join(o.Dir, "nodes", n.Name)
	return [][2]string{
		{filepath.Join(nd, "var-lib"), "/var/lib"},
		{filepath.Join(nd, "var-log"), "/var/log"},
		{filepath.Join(nd, "cni"), filepath.Join(o.Dir, "cni")},
	}
}

// nodeRoot is the path of the node's / as the host sees it.
func nodeRoot(n nodeState) string { return fmt.Sprintf("/proc/%d/root", n.Init.PID) }

// startNodeInit starts the node's init (this executable's hidden node-init
// command) in new mount, network, UTS and PID namespaces and waits for its
// "ready".
func (u *upper) startNodeInit(ctx context.Context, n *nodeState) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	for _, b := range u.o.nodeBinds(*n) {
		if err := os.MkdirAll(b[0], 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(b[1], 0o755); err != nil {
			return err
		}
	}
	argv := []string{exe, "cluster", NodeInitArg, "--name", n.Name}
	for _, b := range u.o.nodeBinds(*n) {
		argv = append(argv, "--bind", b[0]+":"+b[1])
	}
	logPath := filepath.Join(u.l.logs, n.Name+"-init.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid:     true,
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS | syscall.CLONE_NEWPID,
	}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("failed to start node %s's init: %w", n.Name, err)
	}
	pw.Close()
	go func() { _ = cmd.Wait() }()
	n.Init = runstate.Process{Name: n.Name + "-init", PID: cmd.Process.Pid, Exe: exe}
	if rec, ok := runstate.Record(n.Name+"-init", cmd.Process.Pid); ok {
		n.Init = rec
	}
	u.state.Nodes = append(u.state.Nodes, *n)
	if err := runstate.Save(u.l.state, u.state); err != nil {
		return err
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(pr)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		for s.Scan() {
			fmt.Fprintln(logf, s.Text())
		}
	}()
	select {
	case l, ok := <-line:
		if !ok || l != "ready" {
			return fmt.Errorf("node %s's init: %q (see %s)", n.Name, l, logPath)
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("node %s's init not ready after 30s (see %s)", n.Name, logPath)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startInNode starts argv as a daemon in node n's namespaces (nsenter into
// its init's) and records the daemon itself (nsenter's child) under
// "<node>-<name>", with its log in the cluster's logs/<node>-<name>.log.
func (u *upper) startInNode(n nodeState, name string, argv, env []string) error {
	full := append([]string{"nsenter", "--target", strconv.Itoa(n.Init.PID), "--mount", "--uts", "--net", "--pid", "--"}, argv...)
	d, err := startDaemon(n.Name+"-"+name, full, env, u.l.logs)
	if err != nil {
		return err
	}
	// nsenter forks the daemon into the node's PID namespace and waits for
	// it: the daemon is its one child.
	var child int
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", d.rec.PID, d.rec.PID))
		if err != nil {
			return false, d.exited()
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			child, _ = strconv.Atoi(f[0])
			// Forked, and exec'd: no longer nsenter.
			exe, _, ok := runstate.Identity(child)
			return ok && filepath.Base(exe) != "nsenter", nil
		}
		return false, d.exited()
	}); err != nil {
		return fmt.Errorf("%s on node %s did not start: %w", name, n.Name, err)
	}
	if rec, ok := runstate.Record(d.rec.Name, child); ok {
		d.rec = rec
	}
	u.daemons = append(u.daemons, d)
	u.state.Processes = append(u.state.Processes, d.rec)
	return runstate.Save(u.l.state, u.state)
}

// nodesBridgeOwner is the key of NodesBridge's alias: the alias is
// nodesBridgeOwner=<state file of the cluster that made it>.
const nodesBridgeOwner = "fastpath-dev-cluster"

// nodesBridge makes NodesBridge with the host's address (recorded first, so
// Down removes it after a failure), its alias naming this cluster's state
// file. A NodesBridge left by a cluster that is gone (every process of its
// state file dead, or the file itself gone: a killed run, a restarted
// machine) is removed first, with its ports; a live cluster's, or one not
// made by a cluster, is refused.
func (u *upper) nodesBridge() error {
	if err := clearStaleBridge(u.o.Out, NodesBridge); err != nil {
		return err
	}
	u.state.NodesBridge = NodesBridge
	if err := runstate.Save(u.l.state, u.state); err != nil {
		return err
	}
	abs, err := filepath.Abs(u.l.state)
	if err != nil {
		return err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: NodesBridge}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("failed to create bridge %s: %w", NodesBridge, err)
	}
	if err := netlink.LinkSetAlias(br, nodesBridgeOwner+"="+abs); err != nil {
		return fmt.Errorf("failed to mark %s as this cluster's: %w", NodesBridge, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: hostAddr().AsSlice(), Mask: net.CIDRMask(NodesCIDR.Bits(), 32)}}
	if err := netlink.AddrAdd(br, addr); err != nil {
		return fmt.Errorf("failed to address %s: %w", NodesBridge, err)
	}
	return netlink.LinkSetUp(br)
}

// clearStaleBridge removes bridge name (and its veth ports) when a cluster
// that no longer runs left it, saying so on out; it is an error when the
// bridge belongs to a live cluster or was not made by a cluster (no
// nodesBridgeOwner alias): never remove what another made.
func clearStaleBridge(out io.Writer, name string) error {
	old, err := netlink.LinkByName(name)
	if err != nil {
		return nil
	}
	owner, ok := strings.CutPrefix(old.Attrs().Alias, nodesBridgeOwner+"=")
	if !ok || clusterAlive(owner) {
		return fmt.Errorf("link %s exists (another cluster's, or one not brought down?): make cluster-down", name)
	}
	if err := removeBridgeWithPorts(old); err != nil {
		return fmt.Errorf("failed to remove %s, left by the cluster of %s (no longer running): %w", name, owner, err)
	}
	fmt.Fprintf(out, "cluster: removed %s, left by the cluster of %s (no longer running)\n", name, owner)
	return nil
}

// clusterAlive reports whether the cluster whose state file is at path
// still runs: a process it recorded (a daemon or a node's init) is alive.
// A missing or unreadable file is a cluster that is gone.
func clusterAlive(path string) bool {
	st, err := runstate.Load[runState](path)
	if err != nil {
		return false
	}
	for _, p := range st.Processes {
		if p.Alive() {
			return true
		}
	}
	for _, n := range st.Nodes {
		if n.Init.Alive() {
			return true
		}
	}
	return false
}

// removeBridgeWithPorts deletes bridge br and the veths enslaved to it.
func removeBridgeWithPorts(br netlink.Link) error {
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index && l.Type() == "veth" {
			if err := netlink.LinkDel(l); err != nil {
				return fmt.Errorf("failed to delete port %s: %w", l.Attrs().Name, err)
			}
		}
	}
	return netlink.LinkDel(br)
}

// wireNode gives node n its uplink: a veth pair, the host end a port of
// NodesBridge, the other end NodeUplink in the node with its address and a
// default route through the host.
func wireNode(n nodeState) error {
	br, err := netlink.LinkByName(NodesBridge)
	if err != nil {
		return err
	}
	peer := "fpn" + strconv.Itoa(n.Init.PID)
	if len(peer) > 15 {
		peer = peer[:15]
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n.HostLink, MasterIndex: br.Attrs().Index}, PeerName: peer}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("failed to create veth %s: %w", n.HostLink, err)
	}
	host, err := netlink.LinkByName(n.HostLink)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return err
	}
	p, err := netlink.LinkByName(peer)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetNsPid(p, n.Init.PID); err != nil {
		return fmt.Errorf("failed to move %s into node %s: %w", peer, n.Name, err)
	}
	return inNode(n, func(h *netlink.Handle) error {
		l, err := h.LinkByName(peer)
		if err != nil {
			return err
		}
		if err := h.LinkSetName(l, NodeUplink); err != nil {
			return err
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: n.IP.AsSlice(), Mask: net.CIDRMask(NodesCIDR.Bits(), 32)}}
		if err := h.AddrAdd(l, addr); err != nil {
			return err
		}
		if err := h.LinkSetUp(l); err != nil {
			return err
		}
		return h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: hostAddr().AsSlice()})
	})
}

// inNode runs f with a netlink handle in node n's network namespace.
func inNode(n nodeState, f func(*netlink.Handle) error) error {
	ns, err := netns.GetFromPid(n.Init.PID)
	if err != nil {
		return fmt.Errorf("failed to open node %s's network namespace: %w", n.Name, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	return f(h)
}

// podRoutes routes each node's pod CIDR through its address: on the host
// (the API server reaches webhooks and virt-api in pods) and on every
// other node.
func podRoutes(nodes []nodeState) error {
	br, err := netlink.LinkByName(NodesBridge)
	if err != nil {
		return err
	}
	for _, dst := range nodes {
		r := &netlink.Route{LinkIndex: br.Attrs().Index, Dst: prefixNet(dst.PodCIDR), Gw: dst.IP.AsSlice()}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("host route %s via %s: %w", dst.PodCIDR, dst.IP, err)
		}
		for _, on := range nodes {
			if on.Name == dst.Name {
				continue
			}
			if err := inNode(on, func(h *netlink.Handle) error {
				l, err := h.LinkByName(NodeUplink)
				if err != nil {
					return err
				}
				return h.RouteReplace(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: prefixNet(dst.PodCIDR), Gw: dst.IP.AsSlice()})
			}); err != nil {
				return fmt.Errorf("route on %s to %s via %s: %w", on.Name, dst.PodCIDR, dst.IP, err)
			}
		}
	}
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Masked().Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// nodeCgroupRoot is node n's cgroup root, under CgroupRoot.
func nodeCgroupRoot(name string) string { return CgroupRoot + "/" + name }

// upNodes brings up the nodes of a multi-node cluster, one after the other:
// the nodes' bridge, then per node its init and uplink, CNI, containerd,
// the images, the kubelet (until the node is Ready) and kube-proxy, and the
// routes between the pod CIDRs.
func (u *upper) upNodes(ctx context.Context) error {
	o := u.o
	bin := func(name string) string { return filepath.Join(o.BinDir, name) }
	sys, err := readSysctls()
	if err != nil {
		return err
	}
	u.state.Sysctls = sys
	if err := runstate.Save(u.l.state, u.state); err != nil {
		return err
	}
	plan := o.plannedNodes()
	for i := range plan {
		n := &plan[i]
		if err := u.step(fmt.Sprintf("node %s: init (own mount, network, UTS, PID namespaces), uplink %s", n.Name, n.IP), func() error {
			if err := u.startNodeInit(ctx, n); err != nil {
				return err
			}
			if err := wireNode(*n); err != nil {
				return err
			}
			return podRoutes(plan[:i+1])
		}); err != nil {
			return err
		}
		no := o.nodeOptions(*n)
		no.hostRoot = nodeRoot(*n)
		nl := no.layout()
		if err := u.step(fmt.Sprintf("node %s: CNI (pod CIDR %s), containerd", n.Name, n.PodCIDR), func() error {
			for _, d := range []string{no.hostRoot + nl.run, nl.logs} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			if err := no.writeFiles(no.hostRoot); err != nil {
				return err
			}
			if err := no.installCNIBinaries(no.hostRoot); err != nil {
				return err
			}
			env := []string{"FASTPATH_NODE_CONFIG=" + NodeConfigPath(o.Dir)}
			if err := u.startInNode(*n, "containerd", []string{"/usr/bin/containerd", "--config", nl.containerdConfig}, env); err != nil {
				return err
			}
			return u.waitFor(ctx, "containerd's CRI on "+n.Name, time.Minute, func(ctx context.Context) (bool, error) {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_, err := no.crictl(ctx, "info")
				return err == nil, err
			})
		}); err != nil {
			return err
		}
		if err := u.step("node "+n.Name+": images from "+o.ImagesDir, func() error {
			no.Out = io.Discard
			return no.importImages(ctx)
		}); err != nil {
			return err
		}
		if err := u.step(fmt.Sprintf("node %s: kubelet (cgroupfs under %s), Ready", n.Name, nodeCgroupRoot(n.Name)), func() error {
			if err := createCgroupRoot(nodeCgroupRoot(n.Name)); err != nil {
				return err
			}
			if err := u.startInNode(*n, "kubelet", kubeletArgs(bin("kubelet"), nl, n.Name, n.IP), nil); err != nil {
				return err
			}
			return u.waitFor(ctx, "node "+n.Name+" Ready", 3*time.Minute, nodeReady(u.c, n.Name))
		}); err != nil {
			return err
		}
		if err := u.step("node "+n.Name+": kube-proxy (nftables)", func() error {
			if err := u.startInNode(*n, "kube-proxy", []string{bin("kube-proxy"),
				"--kubeconfig=" + nl.kubeconfig("kube-proxy"), "--proxy-mode=nftables",
				"--hostname-override=" + n.Name, "--cluster-cidr=" + o.PodCIDR.Masked().String(),
				fmt.Sprintf("--healthz-bind-address=%s:%d", n.IP, ProxyHealthzPort),
				fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ProxyMetricsPort),
				"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
				"--v=1",
			}, nil); err != nil {
				return err
			}
			return u.waitFor(ctx, "kube-proxy /healthz on "+n.Name, time.Minute, httpOK(fmt.Sprintf("http://%s:%d/healthz", n.IP, ProxyHealthzPort)))
		}); err != nil {
			return err
		}
	}
	return nil
}

// runNodes is Down for a multi-node cluster: per node its kube-proxy and
// kubelet, then every pod sandbox through its containerd (CNI DEL, as on
// one node), containerd, and the node's init, which takes every process,
// mount and network device of the node with it; then what is left in the
// cgroups, the control plane, the cgroups, the nodes' bridge, the kernel
// settings and the directory.
func (d *downer) runNodes(ctx context.Context) {
	for _, n := range d.st.Nodes {
		d.downNode(ctx, n)
	}
	d.step("kill what is left in the pods' cgroups", d.killCgroupProcs)
	d.step("stop the registry, kube-scheduler, kube-controller-manager, kube-apiserver, etcd", func() error {
		return errors.Join(d.stopProc("registry", 10*time.Second), d.stopProc("kube-scheduler", 10*time.Second), d.stopProc("kube-controller-manager", 10*time.Second),
			d.stopProc("kube-apiserver", 20*time.Second), d.stopProc("etcd", 10*time.Second))
	})
	d.step("remove the cgroups under "+CgroupRoot, d.removeCgroups)
	d.td.Bridges = []string{NodesBridge}
	d.step("remove link "+NodesBridge+" and the nodes' uplinks", func() error {
		var errs []error
		for _, n := range d.st.Nodes {
			if l, err := netlink.LinkByName(n.HostLink); err == nil && l.Type() == "veth" {
				errs = append(errs, netlink.LinkDel(l))
			}
		}
		if d.st.NodesBridge != "" {
			if br, err := netlink.LinkByName(d.st.NodesBridge); err == nil {
				if err := netlink.LinkDel(br); err != nil {
					errs = append(errs, fmt.Errorf("failed to delete %s: %w", d.st.NodesBridge, err))
				} else {
					d.td.Removed = append(d.td.Removed, "link "+d.st.NodesBridge)
				}
			}
		}
		return errors.Join(errs...)
	})
	d.step("look for links and OVS bridges with the agent's marks left on the host", d.checkHost(ctx))
	d.restoreKernelSettings()
	d.step("remove "+d.l.run+" and "+d.l.dir+" (keeping logs/)", d.removeDir)
}

// downNode is Down for node n of a multi-node cluster: its kube-proxy and
// kubelet, every pod sandbox through its containerd, then the links with
// the agent's marks in its network namespace (checkMarkedInNode, with
// whether an agent ran there before the pods went), then containerd and the
// node's init, which takes every process, mount and link of the node along.
func (d *downer) downNode(ctx context.Context, n nodeState) {
	agentRan := n.Init.Alive() && agentRunsIn(n.Init.PID, d.agentCgroup)
	d.step("node "+n.Name+": stop kube-proxy and the kubelet", func() error {
		return errors.Join(d.stopProc(n.Name+"-kube-proxy", 10*time.Second), d.stopProc(n.Name+"-kubelet", 20*time.Second))
	})
	if p, ok := d.proc(n.Name + "-containerd"); ok && p.Alive() && n.Init.Alive() {
		no := d.o.nodeOptions(n)
		no.hostRoot = nodeRoot(n)
		nd := &downer{o: no, l: no.layout(), st: d.st}
		d.step("node "+n.Name+": remove every pod sandbox (CRI: stop, CNI DEL, remove)", func() error { return nd.removePods(ctx) })
		d.td.Sandboxes = append(d.td.Sandboxes, nd.td.Sandboxes...)
		d.td.Removed = append(d.td.Removed, nd.td.Removed...)
	}
	d.step(fmt.Sprintf("node %s: links with the agent's marks (agent running: %t)", n.Name, agentRan), func() error {
		return d.checkMarkedInNode(n, agentRan)
	})
	d.step("node "+n.Name+": stop containerd and the node's init (every process, mount and link of the node)", func() error {
		err := d.stopProc(n.Name+"-containerd", 20*time.Second)
		d.td.Processes = append(d.td.Processes, n.Init)
		if n.Init.Alive() {
			err = errors.Join(err, n.Init.Stop(20*time.Second))
		}
		d.td.Removed = append(d.td.Removed, "node "+n.Name)
		return err
	})
}
