package portsec_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/cni/pkg/portsec"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// nftCounter puts an nft first in PATH that records each execution and runs
// the real one, and returns a function that returns and forgets the
// executions recorded so far, and a function that runs the real nft
// without recording it.
func nftCounter(t *testing.T) (taken func() []string, nft func(g Gomega, args ...string) string) {
	t.Helper()
	real, err := exec.LookPath("nft")
	if err != nil {
		t.Fatalf("port security needs nft: %v", err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "executions")
	script := "#!/bin/sh\necho \"nft $*\" >> " + log + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "nft"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	taken = func() []string {
		b, err := os.ReadFile(log)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(log); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	nft = func(g Gomega, args ...string) string {
		out, err := exec.Command(real, args...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "nft %v: %s", args, out)
		return string(out)
	}
	return taken, nft
}

// inNewNS runs f on the test goroutine, its thread moved into a new network
// namespace (removed afterwards) for the time: the namespace's nftables
// ruleset starts empty, as on a node without port security, and nft runs
// in it (the package executes nft from the calling thread).
func inNewNS(t *testing.T, f func()) {
	t.Helper()
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = netns.Close()
		_ = testutils.UnmountNS(netns)
	})
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

// TestApplyExecutesNftOnce: on a node that has the table, Apply and Remove
// each execute nft once; the node's first port, or one after the base chain
// was deleted, takes a second execution that makes (or makes again) the
// table, the map and the base chain with its one rule. Apply of a port
// again replaces its rules.
func TestApplyExecutesNftOnce(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	taken, nft := nftCounter(t)
	ctx := context.Background()
	mac, _ := net.ParseMAC("02:fa:57:00:00:01")
	port := func(name string, ips ...string) portsec.Port {
		p := portsec.Port{HostIf: name, MAC: mac}
		for _, ip := range ips {
			p.IPs = append(p.IPs, net.ParseIP(ip))
		}
		return p
	}
	inNewNS(t, func() {
		g.Expect(portsec.Apply(ctx, port("fpa", "10.250.0.2"))).To(Succeed())
		g.Expect(taken()).To(HaveLen(2), "the node's first port makes the table")
		g.Expect(portsec.Apply(ctx, port("fpb", "10.250.0.3", "fd00::3"))).To(Succeed())
		g.Expect(taken()).To(HaveLen(1))
		// No prefix in a set (an interval set, whose elements nft would read on every ADD: Port.Rules).
		g.Expect(nft(g, "list", "table", "bridge", portsec.TableName)).NotTo(MatchRegexp(`\{[^{}\n]*/[^{}\n]*\}`))
		g.Expect(portsec.Check(ctx, "fpa")).To(Succeed())
		g.Expect(portsec.Check(ctx, "fpb")).To(Succeed())
		taken()

		// Applied again with another address: the same chain, with the new rules only.
		g.Expect(portsec.Apply(ctx, port("fpb", "10.250.0.4"))).To(Succeed())
		g.Expect(taken()).To(HaveLen(1))
		chain := nft(g, "list", "chain", "bridge", portsec.TableName, portsec.ChainName("fpb"))
		g.Expect(chain).To(ContainSubstring("10.250.0.4"))
		g.Expect(chain).NotTo(ContainSubstring("10.250.0.3"))
		g.Expect(strings.Count(chain, "drop") + strings.Count(chain, "accept")).To(Equal(len(port("fpb", "10.250.0.4").Rules())))

		// Without the base chain, the next Apply makes it again, with one rule.
		nft(g, "delete", "chain", "bridge", portsec.TableName, "prerouting")
		g.Expect(portsec.Apply(ctx, port("fpc", "10.250.0.5"))).To(Succeed())
		g.Expect(taken()).To(HaveLen(2))
		base := nft(g, "list", "chain", "bridge", portsec.TableName, "prerouting")
		g.Expect(strings.Count(base, "iifname vmap @ports")).To(Equal(1), base)

		// Without the dispatch rule alone, CHECK sees it.
		g.Expect(portsec.Check(ctx, "fpb")).To(Succeed())
		nft(g, "flush", "chain", "bridge", portsec.TableName, "prerouting")
		g.Expect(portsec.Check(ctx, "fpb")).To(MatchError(ContainSubstring("no base chain prerouting that dispatches through map ports")))
		nft(g, "add", "rule", "bridge", portsec.TableName, "prerouting", "iifname", "vmap", "@ports")
		g.Expect(portsec.Check(ctx, "fpb")).To(Succeed())
		taken()

		g.Expect(portsec.Remove(ctx, "fpa")).To(Succeed())
		g.Expect(taken()).To(HaveLen(1))
		g.Expect(portsec.Check(ctx, "fpa")).To(HaveOccurred())
		taken()

		// Without the table (nft flush ruleset), the next Apply makes it again.
		nft(g, "flush", "ruleset")
		g.Expect(portsec.Apply(ctx, port("fpd", "10.250.0.6"))).To(Succeed())
		g.Expect(taken()).To(HaveLen(2))
		g.Expect(portsec.Check(ctx, "fpd")).To(Succeed())
	})
}

// TestApplyEgressExecutesNftOnce: in a new namespace ApplyEgress executes
// nft once; a chain an earlier interface of the same name left is replaced.
func TestApplyEgressExecutesNftOnce(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	taken, nft := nftCounter(t)
	ctx := context.Background()
	mac, _ := net.ParseMAC("02:fa:57:00:00:01")
	inNewNS(t, func() {
		p := portsec.Port{MAC: mac, IPs: []net.IP{net.ParseIP("10.250.0.2")}}
		g.Expect(portsec.ApplyEgress(ctx, "lo", p)).To(Succeed())
		g.Expect(taken()).To(HaveLen(1))
		g.Expect(portsec.CheckEgress(ctx, "lo")).To(Succeed())
		taken()

		p.IPs = []net.IP{net.ParseIP("10.250.0.3")}
		g.Expect(portsec.ApplyEgress(ctx, "lo", p)).To(Succeed())
		g.Expect(taken()).To(HaveLen(3), "create, remove, create")
		chain := nft(g, "list", "chain", "netdev", portsec.EgressTable, portsec.EgressChainName("lo"))
		g.Expect(chain).To(ContainSubstring("10.250.0.3"))
		g.Expect(chain).NotTo(ContainSubstring("10.250.0.2"))
	})
}
