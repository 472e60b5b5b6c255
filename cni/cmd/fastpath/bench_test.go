package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/bench/benchfig"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// Samples per datapath and concurrency in one benchmark iteration: 40
// sequential ADD/DEL pairs, and rounds of 20 concurrent ADDs followed by 20
// concurrent DELs. The LinuxBridge datapath runs beside Debian's reference
// bridge plugin (refPlugin) in refRounds alternating rounds per
// concurrency: a round of 1 concurrent is refSequential ADD/DEL pairs.
// refRounds is 9, not the 5 the targets need at least: on a shared machine
// one round's ratio varies widely under other work (docs/design.md §5.2),
// and the median of 9 is less at the mercy of two bad rounds.
const (
	sequentialPairs = 40
	concurrency     = 20
	rounds          = 3
	refRounds       = 9
	refSequential   = 8
)

// refPlugin is the reference the CNI ADD latency targets compare with:
// containernetworking-plugins' bridge from Debian (v1.1.1).
const refPlugin = cnitest.SystemCNIPath + "/bridge"

// refMacvlan is what datapath Macvtap is compared with (informational, no
// target): containernetworking-plugins' macvlan from Debian (v1.1.1) in
// bridge mode on the same lower device. There is no reference macvtap
// plugin in Debian; a macvlan is the same link kind without the tap queue
// and its character device, also created straight into the pod's
// namespace (under a temporary name, then renamed), and the reference
// sends a gratuitous ARP after configuring the address, which fastpath
// does not.
const refMacvlan = cnitest.SystemCNIPath + "/macvlan"

// Labels of the references' figures.
const (
	refName        = "bridge-reference"
	refMacvlanName = "macvlan-reference"
)

// reference is the plugin a datapath's CNI ADD is compared with.
type reference struct {
	name, binary string
	// conf renders its netconf for the bridge or lower device br, with
	// host-local in dataDir.
	conf func(br *cnitest.Bridge, dataDir string) map[string]any
}

// references maps the datapaths measured beside a reference to it.
var references = map[string]reference{
	netconf.DatapathLinuxBridge: {name: refName, binary: refPlugin, conf: func(br *cnitest.Bridge, dataDir string) map[string]any {
		return map[string]any{
			"cniVersion": "1.0.0", "name": "fp-ref", "type": "bridge", "bridge": br.Name, "mtu": 9000,
			"isGateway": false, "ipMasq": false,
			"ipam": map[string]any{"type": "host-local", "subnet": "10.251.0.0/24", "dataDir": dataDir},
		}
	}},
	netconf.DatapathMacvtap: {name: refMacvlanName, binary: refMacvlan, conf: func(br *cnitest.Bridge, dataDir string) map[string]any {
		return map[string]any{
			"cniVersion": "1.0.0", "name": "fp-ref", "type": "macvlan", "master": br.Name, "mode": "bridge", "mtu": 9000,
			"ipam": map[string]any{"type": "host-local", "subnet": "10.251.0.0/24", "dataDir": dataDir},
		}
	}},
}

// compared lists the datapaths of references in the order they run; only
// the first (LinuxBridge) has targets.
var compared = []string{netconf.DatapathLinuxBridge, netconf.DatapathMacvtap}

// BenchmarkCNILatency measures the wall-clock latency of the built binary's
// ADD and DEL (exec to exit, host-local IPAM from /usr/lib/cni, CNI 1.0.0)
// per datapath, with 1 and with 20 invocations at once, and reports the p50
// and p99 (nearest rank) in milliseconds. On LinuxBridge it runs Debian's
// reference bridge plugin beside it (same bridge, MTU 9000, host-local
// IPAM, no gateway or masquerade), alternating rounds (the order flips each
// round), and judges the targets cni-add-p50 and cni-add-p99
// fastpath/bridge-reference <= 1.0 at 20 concurrent: each the median over
// rounds of the round's fastpath percentile over the reference's.
// Network namespaces are made before the clock starts. Figures go to
// stdout, to b.ReportMetric and, under `make bench`, to
// $FASTPATH_BENCH_DIR/cni-latency.json.
func BenchmarkCNILatency(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.StartOVS(b)
	samples := map[string][]time.Duration{}
	// perRound[key] holds one p50 and one p99 per round.
	perRound := map[string][][2]float64{}
	for range b.N {
		for _, dp := range compared {
			refN := references[dp].name
			for _, c := range []int{1, concurrency} {
				fp, ref := measureVsReference(b, dp, c)
				for i := range fp.add {
					samples[key(dp, "ADD", c)] = append(samples[key(dp, "ADD", c)], fp.add[i]...)
					samples[key(dp, "DEL", c)] = append(samples[key(dp, "DEL", c)], fp.del[i]...)
					samples[key(refN, "ADD", c)] = append(samples[key(refN, "ADD", c)], ref.add[i]...)
					samples[key(refN, "DEL", c)] = append(samples[key(refN, "DEL", c)], ref.del[i]...)
					perRound[key(dp, "ADD", c)] = append(perRound[key(dp, "ADD", c)], [2]float64{percentile(fp.add[i], 50), percentile(fp.add[i], 99)})
					perRound[key(refN, "ADD", c)] = append(perRound[key(refN, "ADD", c)], [2]float64{percentile(ref.add[i], 50), percentile(ref.add[i], 99)})
				}
			}
		}
		for _, c := range []int{1, concurrency} {
			add, del := measure(b, netconf.DatapathOVS, c)
			samples[key(netconf.DatapathOVS, "ADD", c)] = append(samples[key(netconf.DatapathOVS, "ADD", c)], add...)
			samples[key(netconf.DatapathOVS, "DEL", c)] = append(samples[key(netconf.DatapathOVS, "DEL", c)], del...)
		}
	}

	var figures []benchfig.Figure
	fmt.Printf("%-40s %6s %9s %9s\n", "fastpath CNI latency", "n", "p50 ms", "p99 ms")
	for _, datapath := range []string{netconf.DatapathLinuxBridge, refName, netconf.DatapathMacvtap, refMacvlanName, netconf.DatapathOVS} {
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
	var targets []benchfig.Target
	for _, dp := range compared {
		refN := references[dp].name
		for _, c := range []int{1, concurrency} {
			fp, ref := perRound[key(dp, "ADD", c)], perRound[key(refN, "ADD", c)]
			for q, pct := range []string{"p50", "p99"} {
				var a, r []float64
				for i := range fp {
					a, r = append(a, fp[i][q]), append(r, ref[i][q])
				}
				_, med, lo, hi := benchfig.PairedRatios(a, r)
				name := fmt.Sprintf("cni-add-%s fastpath/%s", pct, refN)
				if dp != netconf.DatapathLinuxBridge {
					name = fmt.Sprintf("cni-add-%s fastpath-%s/%s", pct, dp, refN)
				}
				fmt.Printf("ratio %s (%d concurrent) %.2f [%.2f-%.2f]\n", name, c, med, lo, hi)
				figName := fmt.Sprintf("ADD %s fastpath/%s (%d concurrent)", pct, refN, c)
				if dp != netconf.DatapathLinuxBridge {
					figName = fmt.Sprintf("ADD %s fastpath %s/%s (%d concurrent)", pct, dp, refN, c)
				}
				figures = append(figures, benchfig.Figure{Name: figName, Value: math.Round(med*100) / 100, Unit: "ratio"})
				// Only LinuxBridge has targets (issue 13); Macvtap is informational.
				if dp == netconf.DatapathLinuxBridge && c == concurrency {
					targets = append(targets, benchfig.Target{Kind: "latency", Name: name, Value: med, Goal: 1.0, Detail: fmt.Sprintf(
						"LinuxBridge, %d concurrent ADDs, MTU 9000, host-local IPAM, same bridge; median of %d paired per-round ratios, min-max %.2f-%.2f; %s %.1f ms vs %.1f ms over all rounds",
						c, len(fp), lo, hi, pct, percentile(samples[key(dp, "ADD", c)], float64(50+49*q)), percentile(samples[key(refN, "ADD", c)], float64(50+49*q)))})
				}
			}
		}
	}
	for _, t := range targets {
		fmt.Println("target", t)
	}
	path, err := benchfig.Write(benchfig.File{
		Benchmark: "cni-latency",
		Description: fmt.Sprintf("fastpath CNI binary ADD/DEL wall-clock latency (exec to exit, host-local IPAM, MTU 9000, "+
			"OVS with the userspace datapath); LinuxBridge beside Debian's reference bridge plugin (%s) and Macvtap beside its "+
			"macvlan plugin in bridge mode on the same lower device (%s, informational), %d alternating rounds "+
			"per concurrency (1 concurrent: %d sequential pairs a round; %d concurrent: one batch a round); OVS: %d sequential pairs and %d rounds of %d",
			refPlugin, refMacvlan, refRounds, refSequential, concurrency, sequentialPairs, rounds, concurrency),
		Figures: figures,
		Targets: targets,
	})
	if err != nil {
		b.Fatal(err)
	}
	if path != "" {
		fmt.Printf("figures written to %s\n", path)
	}
}

// latencies are the ADD and DEL latencies of each round.
type latencies struct{ add, del [][]time.Duration }

// measureVsReference runs refRounds rounds of fastpath on datapath (LinuxBridge
// or Macvtap) and of its reference plugin (references) at concurrency c on
// one bridge or lower device of MTU 9000, alternating (the order flips
// every round), each with its own host-local subnet and data directory.
func measureVsReference(b *testing.B, datapath string, c int) (fp, ref latencies) {
	r := references[datapath]
	if _, err := os.Stat(r.binary); err != nil {
		b.Fatalf("the reference plugin %s is missing (apt-get install containernetworking-plugins): %v", r.binary, err)
	}
	br := cnitest.NewBridge(b, datapath, 9000)
	fpConf := br.NetConf(b, cnitest.Conf{CNIVersion: "1.0.0", StateDir: b.TempDir()})
	refConf, err := json.Marshal(r.conf(br, b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	size, batches := c, 1
	if c == 1 {
		batches = refSequential
	}
	round := func(binary string, conf []byte) (add, del []time.Duration) {
		for range batches {
			invs := make([]invocation, size)
			netnses := make([]ns.NetNS, size)
			for i := range invs {
				netnses[i] = cnitest.NewNS(b)
				invs[i] = invocation{containerID: containerID(), netns: netnses[i].Path(), ifName: "net1", cniPath: cnitest.SystemCNIPath, conf: conf}
			}
			a, _ := runAllWith(b, binary, invs, "ADD")
			d, _ := runAllWith(b, binary, invs, "DEL")
			add, del = append(add, a...), append(del, d...)
			for _, n := range netnses {
				cnitest.RemoveNS(n)
			}
		}
		return add, del
	}
	for i := range refRounds {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isFP := range order {
			if isFP {
				a, d := round(bins.Plugin(), fpConf)
				fp.add, fp.del = append(fp.add, a), append(fp.del, d)
			} else {
				a, d := round(r.binary, refConf)
				ref.add, ref.del = append(ref.add, a), append(ref.del, d)
			}
		}
	}
	if ports := br.Ports(b); len(ports) != 0 {
		b.Fatalf("ports left on %s after the samples: %v", br.Name, ports)
	}
	return fp, ref
}

func key(datapath, op string, c int) string { return fmt.Sprintf("%s/%s/%d", datapath, op, c) }

// measure runs the ADD/DEL samples of one datapath at concurrency c on a
// fresh bridge and returns the ADD and DEL latencies.
func measure(b *testing.B, datapath string, c int) (add, del []time.Duration) {
	br := cnitest.NewBridge(b, datapath, 9000)
	conf := br.NetConf(b, cnitest.Conf{CNIVersion: "1.0.0", StateDir: b.TempDir()})
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
	wall, _ := runAllWith(b, bins.Plugin(), invs, command)
	return wall
}

// runAllWith is runAll with another CNI binary (the reference plugin); it
// also returns each run's CPU time: user plus system of the process and of
// the children it waited for (an exec'd host-local), from its rusage.
func runAllWith(b *testing.B, binary string, invs []invocation, command string) (wall, cpu []time.Duration) {
	wall, cpu = make([]time.Duration, len(invs)), make([]time.Duration, len(invs))
	errs := make([]error, len(invs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range invs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inv := invs[i]
			inv.command = command
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary)
			cmd.Env = inv.env()
			cmd.Stdin = strings.NewReader(string(inv.conf))
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			<-start
			t0 := time.Now()
			errs[i] = cmd.Run()
			wall[i] = time.Since(t0)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%w: %s", errs[i], out.String())
				return
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			cpu[i] = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatalf("%s %s failed: %v", binary, command, err)
		}
	}
	return wall, cpu
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

// runBinary executes binary (the fastpath plugin or the reference) with the
// invocation's environment and netconf; a failure carries both outputs.
func (i invocation) runBinary(binary string) (stdout []byte, err error) {
	stdout, stderr, err := cnitest.Exec(context.Background(), binary, i.env(), i.conf)
	if err != nil {
		return stdout, fmt.Errorf("%s %s: %w; stdout %q; stderr %q", binary, i.command, err, stdout, stderr)
	}
	return stdout, nil
}
