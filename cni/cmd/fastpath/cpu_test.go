package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// BenchmarkCNICPU measures the CPU time of an ADD (user plus system, from
// the rusage of the plugin process and of every child it waited for, as an
// exec'd host-local) rather than its wall-clock latency, which a loaded
// machine disturbs far more (docs/benchmarks.md §4). Each round runs, per
// binary, FASTPATH_CPU_CONCURRENCY (default 20) ADDs at once into fresh
// network namespaces on one Linux bridge, then their DELs; the binaries
// alternate and the order flips every round. Binaries: the reference
// bridge plugin and the plugin built from this tree, or instead of the
// latter the fastpath builds listed in FASTPATH_CPU_BINARIES
// (colon-separated paths, e.g. main's plugin and this tree's, each built
// with cnitest.BuildFlags), each labelled by its directory. Rounds:
// FASTPATH_CPU_ROUNDS (default 9). It prints, per binary, the median over
// rounds of each round's median CPU per ADD and per DEL, and the wall-clock
// p50 and p99 of ADD, each ADD figure also as the median over rounds of its
// ratio to the reference's in the same round.
func BenchmarkCNICPU(b *testing.B) {
	testutil.RequireRoot(b)
	type bin struct{ label, path string }
	bins := []bin{{"fastpath (this tree)", bins.Plugin()}, {refName, refPlugin}}
	if list := os.Getenv("FASTPATH_CPU_BINARIES"); list != "" {
		bins = bins[1:]
		for _, p := range strings.Split(list, ":") {
			bins = append(bins, bin{"fastpath " + filepath.Base(filepath.Dir(p)), p})
		}
	}
	conc := envInt(b, "FASTPATH_CPU_CONCURRENCY", concurrency)
	nRounds := envInt(b, "FASTPATH_CPU_ROUNDS", refRounds)
	br := cnitest.NewBridge(b, netconf.DatapathLinuxBridge, 9000)
	ref := references[netconf.DatapathLinuxBridge]
	refConf, err := json.Marshal(ref.conf(br, b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	// The fastpath binaries share one state directory and subnet: they
	// never run at once, and each round DELs what it added.
	fpConf := br.NetConf(b, cnitest.Conf{CNIVersion: "1.0.0", StateDir: b.TempDir()})
	confs := map[string][]byte{}
	for _, bn := range bins {
		confs[bn.label] = fpConf
	}
	confs[refName] = refConf
	type sample struct{ addCPU, delCPU, addWall []time.Duration }
	perRound := map[string][]sample{}
	for range b.N {
		for r := range nRounds {
			order := append([]bin(nil), bins...)
			if r%2 == 1 {
				for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
					order[i], order[j] = order[j], order[i]
				}
			}
			for _, bn := range order {
				netnses := make([]ns.NetNS, conc)
				invs := make([]invocation, conc)
				for i := range invs {
					netnses[i] = cnitest.NewNS(b)
					invs[i] = invocation{containerID: containerID(), netns: netnses[i].Path(), ifName: "net1", cniPath: cnitest.SystemCNIPath, conf: confs[bn.label]}
				}
				addWall, addCPU := runAllWith(b, bn.path, invs, "ADD")
				_, delCPU := runAllWith(b, bn.path, invs, "DEL")
				for _, n := range netnses {
					cnitest.RemoveNS(n)
				}
				perRound[bn.label] = append(perRound[bn.label], sample{addCPU, delCPU, addWall})
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("CPU per invocation, %d rounds of %d concurrent, load %s", nRounds, conc, load)
	for _, bn := range bins {
		var add, del, p50, p99 []float64
		for _, s := range perRound[bn.label] {
			add = append(add, percentile(s.addCPU, 50))
			del = append(del, percentile(s.delCPU, 50))
			p50 = append(p50, percentile(s.addWall, 50))
			p99 = append(p99, percentile(s.addWall, 99))
		}
		// Paired with the reference's figures of the same round.
		var rCPU, r50, r99 []float64
		for i, s := range perRound[refName] {
			rCPU = append(rCPU, add[i]/percentile(s.addCPU, 50))
			r50 = append(r50, p50[i]/percentile(s.addWall, 50))
			r99 = append(r99, p99[i]/percentile(s.addWall, 99))
		}
		fmt.Printf("%-24s ADD cpu %5.2f ms [%5.2f-%5.2f] (%.2fx ref)  DEL cpu %5.2f ms  ADD wall p50 %6.1f (%.2fx) p99 %6.1f ms (%.2fx)\n",
			bn.label, median(add), minOf(add), maxOf(add), median(rCPU), median(del), median(p50), median(r50), median(p99), median(r99))
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func median(s []float64) float64 {
	if len(s) == 0 {
		return 0
	}
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func minOf(s []float64) float64 {
	m := s[0]
	for _, v := range s {
		m = min(m, v)
	}
	return m
}

func maxOf(s []float64) float64 {
	m := s[0]
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
