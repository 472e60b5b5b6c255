package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/go-logr/logr"
	"github.com/vishvananda/netns"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

// What Down says about links carrying the agent's marks (the alias
// fastpath.io/managed-by=fastpath-agent of its Linux bridges and macvtap lower
// devices, fastpath.io/lower-peer=fastpath-agent of the lower devices' peers,
// and the external_ids of its OVS bridges: bridge.Manager.Marked and Managed
// with the default marker, the marks the uninstall's cleanup removes):
//
//   - In the host network namespace (and the host's OVSDB), a marked link or
//     OVS bridge that was not there before Up is left by the cluster: Down
//     fails naming it, and never removes it (the uninstall should have).
//   - In a node's network namespace (a cluster of several nodes), marked
//     links die with the namespace when Down stops the node's init: they are
//     not left on the host. While a fastpath-agent runs in the node
//     (Fastpath still installed, as after `make e2e-cluster`), they are the
//     installed state and Down only counts them; when none runs (Fastpath
//     was uninstalled), they are what the uninstall left, and Down fails
//     naming them.

// agentMarks is the agent's marker as the chart's agent uses it.
var agentMarks = &bridge.Manager{Marker: bridge.DefaultMarker, Log: logr.Discard()}

// markedLinks returns "link <name> (<type>)" for every link carrying the
// agent's marks in the network namespace of h, sorted.
func markedLinks(h netlinksafe.Handle) ([]string, error) {
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("failed to list links: %w", err)
	}
	var out []string
	for _, l := range links {
		if agentMarks.Marked(l) {
			out = append(out, fmt.Sprintf("link %s (%s)", l.Attrs().Name, l.Type()))
		}
	}
	slices.Sort(out)
	return out, nil
}

// markedOVSBridges returns "OVS bridge <name>" for every OVS bridge carrying
// the agent's marker in the OVSDB at endpoint (wellknown.DefaultOVSSocket on
// the host, where the nodes' agents reach it too: their /var/run is the
// host's), sorted; none when its socket does not exist. note says why
// nothing was looked at.
func markedOVSBridges(ctx context.Context, endpoint string) (out []string, note string, err error) {
	path, ok := strings.CutPrefix(endpoint, "unix:")
	if !ok || endpoint == "" {
		return nil, "no OVSDB socket to look at", nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, "no OVSDB at " + path, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn := ovsdb.NewConn(endpoint, logr.Discard())
	m := &bridge.Manager{OVS: conn, Marker: agentMarks.Marker, Log: logr.Discard()}
	states, err := m.Managed(ctx)
	if errors.Is(err, bridge.ErrOVSUnreachable) {
		return nil, "the OVSDB at " + path + " does not answer", nil
	}
	if err != nil {
		return nil, "", err
	}
	for _, s := range states {
		if s.Datapath == fastpathv1alpha1.DatapathOVS {
			out = append(out, "OVS bridge "+s.Name)
		}
	}
	return out, "", nil
}

// markedOnHost returns what carries the agent's marks on the host: links in
// the calling thread's network namespace and OVS bridges in the host's
// OVSDB (markedLinks, markedOVSBridges). Up records it; Down names what is
// there and was not.
func markedOnHost(ctx context.Context, ovsEndpoint string) ([]string, string, error) {
	h, err := netlinksafe.NewHandle()
	if err != nil {
		return nil, "", fmt.Errorf("failed to open netlink: %w", err)
	}
	defer h.Close()
	links, err := markedLinks(h)
	if err != nil {
		return nil, "", err
	}
	ovs, note, err := markedOVSBridges(ctx, ovsEndpoint)
	return append(links, ovs...), note, err
}

// leftSince returns the items of now not in before, which Up recorded; every
// item when before is nil (a run state from before Up recorded it).
func leftSince(before, now []string) []string {
	var out []string
	for _, s := range now {
		if !slices.Contains(before, s) {
			out = append(out, s)
		}
	}
	return out
}

// checkMarkedOnHost is Down's last look at the host: it fails naming every
// link and OVS bridge carrying the agent's marks that was not there before
// Up (runState.MarkedBefore), and removes nothing.
func (d *downer) checkMarkedOnHost(ctx context.Context, h netlinksafe.Handle, ovsEndpoint string) error {
	links, err := markedLinks(h)
	if err != nil {
		return err
	}
	ovs, note, err := markedOVSBridges(ctx, ovsEndpoint)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintf(d.o.Out, "cluster: OVS bridges not looked at: %s\n", note)
	}
	left := leftSince(d.st.MarkedBefore, append(links, ovs...))
	d.td.MarkedLeft = append(d.td.MarkedLeft, left...)
	if len(left) > 0 {
		return fmt.Errorf("left on the host with the agent's marks (%s=%s), not removed: %s; the uninstall's node cleanup did not run or failed (docs/operations.md#uninstalling)",
			wellknown.MarkerKey, bridge.DefaultMarker, strings.Join(left, ", "))
	}
	return nil
}

// nodeNetNS opens the network namespace of the node whose init is pid.
func nodeNetNS(pid int) (netlinksafe.Handle, error) {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return netlinksafe.Handle{}, fmt.Errorf("failed to open the network namespace of pid %d: %w", pid, err)
	}
	// The handle holds its own reference to the namespace; closing ours here
	// and the handle after use leaves none that would keep the namespace
	// alive once the node's init is gone.
	defer ns.Close()
	h, err := netlinksafe.NewHandleAt(ns)
	if err != nil {
		return netlinksafe.Handle{}, fmt.Errorf("failed to open netlink in the network namespace of pid %d: %w", pid, err)
	}
	return h, nil
}

// agentRunsIn reports whether a fastpath-agent that is not cleaning up
// (neither --cleanup nor the --install-cni init container) runs in the
// network namespace of pid, in a cgroup under cgroup when it is not empty
// (CgroupRoot: a pod of this cluster, not another agent on the host such as
// the demo's or the soak's): Fastpath is installed on that node.
func agentRunsIn(pid int, cgroup string) bool {
	want, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return false
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := "/proc/" + e.Name()
		if comm, _ := os.ReadFile(dir + "/comm"); strings.TrimSpace(string(comm)) != "fastpath-agent" {
			continue
		}
		if ns, _ := os.Readlink(dir + "/ns/net"); ns != want {
			continue
		}
		if cgroup != "" && !inCgroup(dir, cgroup) {
			continue
		}
		cmdline, _ := os.ReadFile(dir + "/cmdline")
		args := strings.Split(string(cmdline), "\x00")
		if !slices.Contains(args, "--cleanup") && !slices.Contains(args, "--install-cni") {
			return true
		}
	}
	return false
}

// inCgroup reports whether the process of /proc/<pid> dir is in cgroup or
// below it in one of its hierarchies.
func inCgroup(dir, cgroup string) bool {
	b, _ := os.ReadFile(dir + "/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-ID:controllers:path
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && strings.HasPrefix(f[2], cgroup+"/") {
			return true
		}
	}
	return false
}

// checkMarkedInNode looks at the links carrying the agent's marks in node
// n's network namespace, before Down stops its init (which takes them
// along). agentRan says whether a fastpath-agent ran in the node when Down
// began: then they are Fastpath's installed state and only counted;
// otherwise Down fails naming them, as an uninstall left them.
func (d *downer) checkMarkedInNode(n nodeState, agentRan bool) error {
	if !n.Init.Alive() {
		return nil
	}
	h, err := nodeNetNS(n.Init.PID)
	if err != nil {
		return err
	}
	links, err := markedLinks(h)
	h.Close()
	if err != nil {
		return err
	}
	if len(links) == 0 {
		return nil
	}
	if agentRan {
		d.td.NodeMarkedLinks = append(d.td.NodeMarkedLinks, n.Name+": "+strings.Join(links, ", "))
		fmt.Fprintf(d.o.Out, "cluster: node %s: %d links with the agent's marks go with its network namespace (Fastpath still installed)\n", n.Name, len(links))
		return nil
	}
	d.td.MarkedLeft = append(d.td.MarkedLeft, prefixAll(n.Name+": ", links)...)
	return fmt.Errorf("left in node %s with the agent's marks (%s=%s) and no fastpath-agent running there: %s; the uninstall's node cleanup did not run or failed (docs/operations.md#uninstalling)",
		n.Name, wellknown.MarkerKey, bridge.DefaultMarker, strings.Join(links, ", "))
}

// checkHost returns Down's step that runs checkMarkedOnHost in the calling
// thread's network namespace (the host's) with the host's OVSDB.
func (d *downer) checkHost(ctx context.Context) func() error {
	return func() error {
		h, err := netlinksafe.NewHandle()
		if err != nil {
			return fmt.Errorf("failed to open netlink: %w", err)
		}
		defer h.Close()
		return d.checkMarkedOnHost(ctx, h, wellknown.DefaultOVSSocket)
	}
}

func prefixAll(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}
