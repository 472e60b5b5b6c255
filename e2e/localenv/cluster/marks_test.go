package cluster

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// fakeNode starts exe (sleep, or a copy of it) in a network namespace of
// its own, as a node's init, and returns its record; the namespace and
// every link in it go when the process ends, which t.Cleanup ensures.
func fakeNode(t *testing.T, name, exe string) nodeState {
	t.Helper()
	cmd := exec.Command(exe, "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatalf("failed to start %s in a new network namespace: %v", exe, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // reaps it whoever kills it
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	p, ok := runstate.Record(name, cmd.Process.Pid)
	if !ok {
		t.Fatalf("%s (pid %d) is gone", exe, cmd.Process.Pid)
	}
	return nodeState{Name: name, Init: p}
}

// addLinks makes, in the network namespace of pid, the links named
// <prefix><suffix>: b (a bridge with the agent's marker), l and p (a macvtap
// lower device and its peer, marked as the agent marks them), u (a bridge
// without alias), o (a bridge with another marker value) and d (a macvlan
// on u with the agent's marker: not a kind the agent marks). It returns the
// names of the three that carry the agent's marks and the three that do
// not.
func addLinks(t *testing.T, pid int, prefix string) (marked, unmarked []string) {
	t.Helper()
	g := NewWithT(t)
	ns, err := netns.GetFromPid(pid)
	g.Expect(err).NotTo(HaveOccurred())
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	g.Expect(err).NotTo(HaveOccurred())
	defer h.Close()
	agent := wellknown.MarkerKey + "=" + bridge.DefaultMarker
	add := func(l netlink.Link, alias string) {
		g.Expect(h.LinkAdd(l)).To(Succeed(), l.Attrs().Name)
		if alias != "" {
			g.Expect(h.LinkSetAlias(l, alias)).To(Succeed(), l.Attrs().Name)
		}
	}
	add(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: prefix + "b"}}, agent)
	add(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: prefix + "l"}, PeerName: prefix + "p"}, agent)
	peer, err := h.LinkByName(prefix + "p")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.LinkSetAlias(peer, bridge.PeerMarkerKey+"="+bridge.DefaultMarker)).To(Succeed())
	add(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: prefix + "u"}}, "")
	add(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: prefix + "o"}}, wellknown.MarkerKey+"=someone-else")
	parent, err := h.LinkByName(prefix + "u")
	g.Expect(err).NotTo(HaveOccurred())
	add(&netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: prefix + "d", ParentIndex: parent.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE}, agent)
	return []string{prefix + "b", prefix + "l", prefix + "p"}, []string{prefix + "u", prefix + "o", prefix + "d"}
}

func testDowner() (*downer, *bytes.Buffer) {
	out := &bytes.Buffer{}
	return &downer{o: Options{Out: out}}, out
}

// TestDownNamesMarkedLinksLeftInANodeWithoutAgent: when no agent runs in a
// node (Fastpath was uninstalled), Down fails naming each link with the
// agent's marks in the node's network namespace, and no other link, then
// stops the node's init all the same.
func TestDownNamesMarkedLinksLeftInANodeWithoutAgent(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	n := fakeNode(t, testutil.UniqueName("fpnode"), "/bin/sleep")
	marked, unmarked := addLinks(t, n.Init.PID, testutil.UniqueName("fpm"))

	d, out := testDowner()
	d.downNode(context.Background(), n)

	g.Expect(d.errs).To(HaveLen(1), out.String())
	for _, l := range marked {
		g.Expect(d.errs[0].Error()).To(ContainSubstring("link "+l+" "), out.String())
	}
	for _, l := range unmarked {
		g.Expect(d.errs[0].Error()).NotTo(ContainSubstring(l), out.String())
	}
	g.Expect(d.errs[0].Error()).To(ContainSubstring("no fastpath-agent running"))
	g.Expect(d.td.MarkedLeft).To(HaveLen(3))
	g.Expect(n.Init.Alive()).To(BeFalse(), "the node's init is stopped after the check")
}

// TestDownCountsMarkedLinksOfANodeWithAgent: while a fastpath-agent runs
// in the node (Fastpath still installed, as after `make e2e-cluster`), its
// marked links go with the node's network namespace: Down only counts them.
func TestDownCountsMarkedLinksOfANodeWithAgent(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	n := fakeNode(t, testutil.UniqueName("fpnode"), fakeAgent(t))
	marked, _ := addLinks(t, n.Init.PID, testutil.UniqueName("fpm"))

	d, out := testDowner() // no agent cgroup: any fastpath-agent in the node counts
	d.downNode(context.Background(), n)

	g.Expect(d.errs).To(BeEmpty(), out.String())
	g.Expect(out.String()).To(ContainSubstring("agent running: true"))
	g.Expect(d.td.MarkedLeft).To(BeEmpty())
	g.Expect(d.td.NodeMarkedLinks).To(HaveLen(1))
	for _, l := range marked {
		g.Expect(d.td.NodeMarkedLinks[0]).To(ContainSubstring("link " + l + " "))
	}
	g.Expect(n.Init.Alive()).To(BeFalse())
}

// TestCheckMarkedOnHostNamesOnlyWhatCameAfterUp runs Down's host check on a
// network namespace of the test's standing for the host: it names the
// marked links that were not there before Up, no other link, and removes
// nothing.
func TestCheckMarkedOnHostNamesOnlyWhatCameAfterUp(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	host := fakeNode(t, "host", "/bin/sleep")
	prefix := testutil.UniqueName("fph")
	marked, unmarked := addLinks(t, host.Init.PID, prefix)
	h, err := nodeNetNS(host.Init.PID)
	g.Expect(err).NotTo(HaveOccurred())
	defer h.Close()

	d, _ := testDowner()
	d.st.MarkedBefore = []string{"link " + prefix + "b (bridge)"} // there before Up
	err = d.checkMarkedOnHost(context.Background(), h, "")
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring(prefix + "b"))
	for _, l := range marked[1:] {
		g.Expect(err.Error()).To(ContainSubstring("link " + l + " (veth)"))
	}
	for _, l := range unmarked {
		g.Expect(err.Error()).NotTo(ContainSubstring(l))
	}
	links, err := h.LinkList()
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	g.Expect(names).To(ContainElements(append(marked, unmarked...)), "nothing removed")

	d, _ = testDowner()
	d.st.MarkedBefore = []string{"link " + prefix + "b (bridge)", "link " + prefix + "l (veth)", "link " + prefix + "p (veth)"}
	g.Expect(d.checkMarkedOnHost(context.Background(), h, "")).To(Succeed())
	g.Expect(strings.Join(d.td.MarkedLeft, ",")).To(BeEmpty())
}

// fakeAgent returns a copy of sleep named fastpath-agent, which stands for
// the agent; being a node's init does not matter to the check.
func fakeAgent(t *testing.T) string {
	t.Helper()
	agent := filepath.Join(t.TempDir(), "fastpath-agent")
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agent, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return agent
}

// TestDownIgnoresAnAgentOutsideTheClustersCgroups: a fastpath-agent that is
// not in the cluster's pods' cgroups (the demo's, the soak's) does not make
// the node's marked links the installed state: Down names them.
func TestDownIgnoresAnAgentOutsideTheClustersCgroups(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	n := fakeNode(t, testutil.UniqueName("fpnode"), fakeAgent(t))
	marked, _ := addLinks(t, n.Init.PID, testutil.UniqueName("fpm"))

	d, out := testDowner()
	d.agentCgroup = CgroupRoot
	d.downNode(context.Background(), n)

	g.Expect(out.String()).To(ContainSubstring("agent running: false"))
	g.Expect(d.errs).To(HaveLen(1), out.String())
	for _, l := range marked {
		g.Expect(d.errs[0].Error()).To(ContainSubstring("link "+l+" "), out.String())
	}
}
