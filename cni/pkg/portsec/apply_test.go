package portsec_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/cni/pkg/portsec"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// nftTool returns a function that runs the nft binary, which the tests use
// to inspect and to tamper with the ruleset, and puts an nft first in PATH
// that records its executions and fails: the package talks netlink and
// must never execute nft, which the cleanup verifies.
func nftTool(t *testing.T) func(g Gomega, stdin string, args ...string) string {
	t.Helper()
	real, err := exec.LookPath("nft")
	if err != nil {
		t.Skipf("the tests inspect the ruleset with nft: %v", err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "executions")
	script := "#!/bin/sh\necho \"nft $*\" >> " + log + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "nft"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Cleanup(func() {
		if b, err := os.ReadFile(log); err == nil {
			t.Errorf("the package executed nft:\n%s", b)
		}
	})
	return func(g Gomega, stdin string, args ...string) string {
		cmd := exec.Command(real, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "nft %v: %s", args, out)
		return string(out)
	}
}

// newNS makes a network namespace, removed at cleanup: its nftables
// ruleset starts empty, as on a node without port security.
func newNS(t *testing.T) ns.NetNS {
	t.Helper()
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = netns.Close()
		_ = testutils.UnmountNS(netns)
	})
	return netns
}

// inNewNS runs f on the test goroutine, its thread moved into a new network
// namespace (newNS) for the time: the package's netlink sockets and the
// nft the test executes are opened from that thread.
func inNewNS(t *testing.T, f func()) {
	t.Helper()
	netns := newNS(t)
	runtime.LockOSThread()
	host, err := ns.GetCurrentNS()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// A thread that cannot go back stays locked: Go ends it with the goroutine.
		if err := host.Set(); err != nil {
			t.Errorf("failed to return to the host network namespace: %v", err)
			return
		}
		runtime.UnlockOSThread()
		_ = host.Close()
	}()
	if err := netns.Set(); err != nil {
		t.Fatal(err)
	}
	f()
}

func port(name string, ips ...string) portsec.Port {
	mac, _ := net.ParseMAC("02:fa:57:00:00:01")
	p := portsec.Port{HostIf: name, MAC: mac}
	for _, ip := range ips {
		p.IPs = append(p.IPs, net.ParseIP(ip))
	}
	return p
}

// mapComment is the comment of the dispatch map (google/nftables v0.3.0
// cannot comment the table).
const mapComment = "fastpath port security: each bridge port forwards only its own MAC and IPs"

// want returns, in nft syntax, what Apply of ports should make: the table,
// the dispatch map, the base chain with its rule, and each port's chain
// with Port.Rules and its map entry. It is the specification the tests
// compare the kernel's ruleset with, by making it with nft in a namespace
// of its own and listing both.
func want(ports ...portsec.Port) string {
	var b strings.Builder
	t := "bridge " + portsec.TableName
	fmt.Fprintf(&b, "add table %s\n", t)
	fmt.Fprintf(&b, "add map %s ports { type ifname : verdict ; comment %q ; }\n", t, mapComment)
	fmt.Fprintf(&b, "add chain %s prerouting { type filter hook prerouting priority filter ; policy accept ; }\n", t)
	fmt.Fprintf(&b, "add rule %s prerouting iifname vmap @ports\n", t)
	for _, p := range ports {
		chain := portsec.ChainName(p.HostIf)
		fmt.Fprintf(&b, "add chain %s %s\n", t, chain)
		for _, r := range p.Rules() {
			fmt.Fprintf(&b, "add rule %s %s %s\n", t, chain, r)
		}
		fmt.Fprintf(&b, "add element %s ports { %q : goto %s }\n", t, p.HostIf, chain)
	}
	return b.String()
}

// listing returns nft's listing of script made in a new namespace.
func listing(t *testing.T, nft func(g Gomega, stdin string, args ...string) string, script string) string {
	t.Helper()
	g := NewWithT(t)
	var out string
	g.Expect(newNS(t).Do(func(ns.NetNS) error {
		nft(g, script, "-f", "-")
		out = nft(g, "", "list", "ruleset")
		return nil
	})).To(Succeed())
	return out
}

// sameRuleset expects the listings got and want to hold the same table,
// sets and chains: nft lists chains in the order they were made, which the
// tests' history changes.
func sameRuleset(g Gomega, got, want string) {
	blocks := func(listing string) []string {
		b := strings.Split(strings.TrimSuffix(listing, "}\n"), "\n\n")
		slices.Sort(b)
		return b
	}
	g.Expect(blocks(got)).To(Equal(blocks(want)), "ruleset:\n%s\nwant:\n%s", got, want)
}

// TestApply: Apply makes, over netlink, the ruleset that nft makes of the
// rules in nft syntax (Port.Rules); applied again, a port's rules are
// replaced; a missing base chain, rule or table is made again; CHECK sees
// what is missing; Remove removes a port and is idempotent.
func TestApply(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	nft := nftTool(t)
	ctx := context.Background()
	a, b, c := port("fpa", "10.250.0.2"), port("fpb", "10.250.0.3", "fd00::3", "10.250.0.7"), port("fpc", "fd00::4")
	inNewNS(t, func() {
		ruleset := func() string { return nft(g, "", "list", "ruleset") }
		g.Expect(portsec.Check(ctx, "fpa")).To(MatchError(ContainSubstring("port security of fpa is missing")))
		g.Expect(portsec.Apply(ctx, a)).To(Succeed(), "the node's first port makes the table")
		g.Expect(portsec.Apply(ctx, b)).To(Succeed())
		g.Expect(portsec.Apply(ctx, c)).To(Succeed(), "no IPv4 address: no IPv4 and no ARP")
		sameRuleset(g, ruleset(), listing(t, nft, want(a, b, c)))
		// No prefix in a set (an interval set: Port.Rules).
		g.Expect(ruleset()).NotTo(MatchRegexp(`\{[^{}\n]*/[^{}\n]*\}`))
		for _, p := range []string{"fpa", "fpb", "fpc"} {
			g.Expect(portsec.Check(ctx, p)).To(Succeed())
		}

		// Applied again with another address: the same chain, with the new rules only.
		b2 := port("fpb", "10.250.0.4")
		g.Expect(portsec.Apply(ctx, b2)).To(Succeed())
		sameRuleset(g, ruleset(), listing(t, nft, want(a, b2, c)))

		// Without the base chain, the next Apply makes it again, with one rule.
		nft(g, "", "delete", "chain", "bridge", portsec.TableName, "prerouting")
		g.Expect(portsec.Check(ctx, "fpa")).To(MatchError(ContainSubstring("no base chain prerouting that dispatches through map ports")))
		d := port("fpd", "10.250.0.5")
		g.Expect(portsec.Apply(ctx, d)).To(Succeed())
		sameRuleset(g, ruleset(), listing(t, nft, want(a, b2, c, d)))

		// Without the dispatch rule alone, CHECK sees it.
		nft(g, "", "flush", "chain", "bridge", portsec.TableName, "prerouting")
		g.Expect(portsec.Check(ctx, "fpb")).To(MatchError(ContainSubstring("no base chain prerouting that dispatches through map ports")))
		nft(g, "", "add", "rule", "bridge", portsec.TableName, "prerouting", "iifname", "vmap", "@ports")
		g.Expect(portsec.Check(ctx, "fpb")).To(Succeed())

		// Without its map entry or its chain, CHECK sees it.
		nft(g, "", "delete", "element", "bridge", portsec.TableName, "ports", `{ "fpc" }`)
		g.Expect(portsec.Check(ctx, "fpc")).To(MatchError(ContainSubstring("map ports of table bridge fastpath does not send it to chain port-fpc")))
		g.Expect(portsec.Remove(ctx, "fpc")).To(Succeed(), "the chain without its entry")

		g.Expect(portsec.Remove(ctx, "fpa")).To(Succeed())
		g.Expect(portsec.Check(ctx, "fpa")).To(MatchError(ContainSubstring("table bridge fastpath has no chain port-fpa")))
		sameRuleset(g, ruleset(), listing(t, nft, want(b2, d)))
		g.Expect(portsec.Remove(ctx, "fpa")).To(Succeed(), "nothing to remove")

		// Without the table (nft flush ruleset), the next Apply makes it again.
		nft(g, "", "flush", "ruleset")
		g.Expect(portsec.Remove(ctx, "fpb")).To(Succeed(), "no table")
		g.Expect(portsec.Apply(ctx, d)).To(Succeed())
		sameRuleset(g, ruleset(), listing(t, nft, want(d)))
		g.Expect(portsec.Check(ctx, "fpd")).To(Succeed())
	})
}

// TestApplyFailsWhole: an Apply the kernel refuses leaves nothing of its
// transaction, with or without the base chain.
func TestApplyFailsWhole(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	nft := nftTool(t)
	ctx := context.Background()
	inNewNS(t, func() {
		// A map "ports" of another key type refuses the port's entry.
		tampered := "add table bridge fastpath\nadd map bridge fastpath ports { type ipv4_addr : verdict ; }\n"
		nft(g, tampered, "-f", "-")
		before := nft(g, "", "list", "ruleset")
		g.Expect(portsec.Apply(ctx, port("fpa", "10.250.0.2"))).NotTo(Succeed())
		g.Expect(nft(g, "", "list", "ruleset")).To(Equal(before), "no base chain, no port chain")

		nft(g, "add chain bridge fastpath prerouting { type filter hook prerouting priority filter ; policy accept ; }\n", "-f", "-")
		before = nft(g, "", "list", "ruleset")
		g.Expect(portsec.Apply(ctx, port("fpa", "10.250.0.2"))).NotTo(Succeed())
		g.Expect(nft(g, "", "list", "ruleset")).To(Equal(before), "no port chain")
	})
}

// TestApplyOverNftRuleset: on a node whose table an earlier plugin made
// with nft (with a table comment), Apply adds ports, and makes the base
// chain again when it is gone.
func TestApplyOverNftRuleset(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	nft := nftTool(t)
	ctx := context.Background()
	inNewNS(t, func() {
		old := strings.Replace(want(port("fpa", "10.250.0.2")), "add table bridge fastpath\n",
			"add table bridge fastpath { comment \"fastpath port security\" ; }\n", 1)
		old = strings.Replace(old, " comment "+fmt.Sprintf("%q", mapComment)+" ;", "", 1)
		nft(g, old, "-f", "-")
		g.Expect(portsec.Apply(ctx, port("fpb", "10.250.0.3"))).To(Succeed())
		nft(g, "", "delete", "chain", "bridge", portsec.TableName, "prerouting")
		g.Expect(portsec.Apply(ctx, port("fpc", "10.250.0.4"))).To(Succeed())
		for _, p := range []string{"fpa", "fpb", "fpc"} {
			g.Expect(portsec.Check(ctx, p)).To(Succeed())
		}
		g.Expect(strings.Count(nft(g, "", "list", "chain", "bridge", portsec.TableName, "prerouting"), "iifname vmap @ports")).To(Equal(1))
	})
}

// TestApplyConcurrent: ADDs that run at once on a node without the table
// all succeed and leave one base chain with exactly one dispatch rule.
func TestApplyConcurrent(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	nft := nftTool(t)
	ctx := context.Background()
	netns := newNS(t)
	const n = 20
	ports := make([]portsec.Port, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ports {
		ports[i] = port(fmt.Sprintf("fp%d", i), fmt.Sprintf("10.250.1.%d", i+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = netns.Do(func(ns.NetNS) error { return portsec.Apply(ctx, ports[i]) })
		}()
	}
	wg.Wait()
	for i, err := range errs {
		g.Expect(err).NotTo(HaveOccurred(), ports[i].HostIf)
	}
	g.Expect(netns.Do(func(ns.NetNS) error {
		for _, p := range ports {
			g.Expect(portsec.Check(ctx, p.HostIf)).To(Succeed())
		}
		base := nft(g, "", "list", "chain", "bridge", portsec.TableName, "prerouting")
		g.Expect(strings.Count(base, "iifname vmap @ports")).To(Equal(1), base)
		return nil
	})).To(Succeed())
}

// TestApplyEgress: ApplyEgress makes the egress chain nft makes of the
// rules in nft syntax; a chain an earlier interface of the same name left
// is replaced; CHECK sees it and misses it once removed.
func TestApplyEgress(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	nft := nftTool(t)
	ctx := context.Background()
	wantEgress := func(p portsec.Port) string {
		var b strings.Builder
		fmt.Fprintf(&b, "add table netdev %s\n", portsec.EgressTable)
		fmt.Fprintf(&b, "add chain netdev %s %s { type filter hook egress device \"lo\" priority filter ; policy accept ; }\n", portsec.EgressTable, portsec.EgressChainName("lo"))
		for _, r := range p.Rules() {
			fmt.Fprintf(&b, "add rule netdev %s %s %s\n", portsec.EgressTable, portsec.EgressChainName("lo"), r)
		}
		return b.String()
	}
	inNewNS(t, func() {
		p := port("", "10.250.0.2")
		g.Expect(portsec.CheckEgress(ctx, "lo")).To(MatchError(ContainSubstring("port security of lo is missing")))
		g.Expect(portsec.ApplyEgress(ctx, "lo", p)).To(Succeed())
		g.Expect(portsec.CheckEgress(ctx, "lo")).To(Succeed())
		sameRuleset(g, nft(g, "", "list", "ruleset"), listing(t, nft, wantEgress(p)))

		p = port("", "10.250.0.3", "fd00::3")
		g.Expect(portsec.ApplyEgress(ctx, "lo", p)).To(Succeed())
		sameRuleset(g, nft(g, "", "list", "ruleset"), listing(t, nft, wantEgress(p)))
		g.Expect(portsec.CheckEgress(ctx, "lo")).To(Succeed())

		g.Expect(portsec.RemoveEgress(ctx, "lo")).To(Succeed())
		g.Expect(portsec.CheckEgress(ctx, "lo")).To(MatchError(ContainSubstring("port security of lo is missing")))
		g.Expect(portsec.RemoveEgress(ctx, "lo")).To(Succeed(), "nothing to remove")
	})
}
