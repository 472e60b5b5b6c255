package main

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/netconf"
	"github.com/fastpath-io/fastpath/internal/bench/benchfig"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// Samples per datapath and concurrency in one benchmark iteration: 40
// sequential ADD/DEL pairs, and 3 rounds of 20 concurrent ADDs followed by
// 20 concurrent DELs (60 samples of each).
const (
	sequentialPairs = 40
	concurrency     = 20
	rounds          = 3
)

// BenchmarkCNILatency measures the wall-clock latency of the built binary's
// ADD and DEL (exec to exit, host-local IPAM from /usr/lib/cni, CNI 1.0.0)
// per datapath, with 1 and with 20 invocations at once, and reports the p50
// and p99 (nearest rank) in milliseconds. Network namespaces are made
// before the clock starts. Figures go to stdout, to b.ReportMetric and,
// under `make bench`, to $FASTPATH_BENCH_DIR/cni-latency.json.
func BenchmarkCNILatency(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.StartOVS(b)
	samples := map[string][]time.Duration{}
	for range b.N {
		for _, datapath := range []string{netconf.DatapathLinuxBridge, netconf.DatapathOVS} {
			for _, c := range []int{1, concurrency} {
				add, del := measure(b, datapath, c)
				samples[key(datapath, "ADD", c)] = append(samples[key(datapath, "ADD", c)], add...)
				samples[key(datapath, "DEL", c)] = append(samples[key(datapath, "DEL", c)], del...)
			}
		}
	}

	var figures []benchfig.Figure
	fmt.Printf("%-40s %6s %9s %9s\n", "fastpath CNI latency", "n", "p50 ms", "p99 ms")
	for _, datapath := range []string{netconf.DatapathLinuxBridge, netconf.DatapathOVS} {
		for _, c := range []int{1, concurrency} {
			for _, op := range []string{"ADD", "DEL"} {
				s := samples[key(datapath, op, c)]
				p50, p99 := percentile(s, 50), percentile(s, 99)
				name := fmt.Sprintf("%s %s (%d concurrent)", datapath, op, c)
				fmt.Printf("%-40s %6d %9.1f %9.1f\n", name, len(s), p50, p99)
				figures = append(figures,
					benchfig.Figure{Name: fmt.Sprintf("%s %s p50 (%d concurrent)", datapath, op, c), Value: round(p50), Unit: "ms"},
					benchfig.Figure{Name: fmt.Sprintf("%s %s p99 (%d concurrent)", datapath, op, c), Value: round(p99), Unit: "ms"})
				b.ReportMetric(p50, fmt.Sprintf("%s-%s-c%d-p50-ms", datapath, op, c))
				b.ReportMetric(p99, fmt.Sprintf("%s-%s-c%d-p99-ms", datapath, op, c))
			}
		}
	}
	path, err := benchfig.Write(benchfig.File{
		Benchmark: "cni-latency",
		Description: fmt.Sprintf("fastpath CNI binary ADD/DEL wall-clock latency (exec to exit, host-local IPAM, MTU 9000, "+
			"OVS with the userspace datapath); %d sequential pairs and %d rounds of %d concurrent invocations per datapath",
			sequentialPairs, rounds, concurrency),
		Figures: figures,
	})
	if err != nil {
		b.Fatal(err)
	}
	if path != "" {
		fmt.Printf("figures written to %s\n", path)
	}
}

func key(datapath, op string, c int) string { return fmt.Sprintf("%s/%s/%d", datapath, op, c) }

// measure runs the ADD/DEL samples of one datapath at concurrency c on a
// fresh bridge and returns the ADD and DEL latencies.
func measure(b *testing.B, datapath string, c int) (add, del []time.Duration) {
	br := cnitest.NewBridge(b, datapath, 9000)
	stateDir, ipamDir := b.TempDir(), b.TempDir()
	conf := br.NetConf(b, cnitest.Conf{CNIVersion: "1.0.0", StateDir: stateDir, IPAMDir: ipamDir})
	batches, size := sequentialPairs, 1
	if c > 1 {
		batches, size = rounds, c
	}
	for range batches {
		invs := make([]invocation, size)
		netnses := make([]ns.NetNS, size)
		for i := range invs {
			netnses[i] = cnitest.NewNS(b)
			invs[i] = invocation{containerID: containerID(), netns: netnses[i].Path(), ifName: "net1", cniPath: cnitest.SystemCNIPath, conf: conf}
		}
		add = append(add, runAll(b, invs, "ADD")...)
		del = append(del, runAll(b, invs, "DEL")...)
		for _, n := range netnses {
			cnitest.RemoveNS(n)
		}
	}
	if ports := br.Ports(b); len(ports) != 0 {
		b.Fatalf("ports left on %s after the %s samples: %v", br.Name, datapath, ports)
	}
	return add, del
}

// runAll starts the command of every invocation at once and returns how
// long each took.
func runAll(b *testing.B, invs []invocation, command string) []time.Duration {
	durations := make([]time.Duration, len(invs))
	errs := make([]error, len(invs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range invs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inv := invs[i]
			inv.command = command
			<-start
			t0 := time.Now()
			_, errs[i] = inv.run()
			durations[i] = time.Since(t0)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatalf("%s failed: %v", command, err)
		}
	}
	return durations
}

// percentile returns the nearest-rank p-th percentile of s in milliseconds.
func percentile(s []time.Duration, p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	sorted := append([]time.Duration(nil), s...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return float64(sorted[max(rank, 1)-1]) / float64(time.Millisecond)
}

func round(ms float64) float64 { return math.Round(ms*10) / 10 }
