package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// WriteResultsTable prints the runs of doc as a table, one row per matrix
// point and path, the reference (baseline) paths beside the others, with
// the speed-up of every non-reference path over each reference at that
// point (for RR tests the ratio of transaction rates). Stream throughput is
// the median in Gbit/s (10^9) with min-max over the repetitions; RR tests
// show the median transactions per second and mean round trip in µs. CPU
// is the median service demand in µs per KiB (netperf -c -C), "-" when not
// measured; UDP_STREAM rows add the median loss. When any run has host CPU
// figures (VM mode), two columns follow the service demand: the median host
// CPU seconds per GB and Gbit/s per host core, and a last line labels them
// "emulated CPU (TCG)" for TCG guests.
func WriteResultsTable(w io.Writer, doc results.Document) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	host := slices.ContainsFunc(doc.Runs, hasHostCPU)
	hostHeader := ""
	if host {
		hostHeader = "\tHOST CPU s/GB\tGBIT/S PER HOST CORE"
	}
	fmt.Fprintln(tw, "TEST\tSOCKET\tMESSAGE\tSESSIONS\tPAIRS\tPATH\tMTU\tGBIT/S (MIN-MAX)\tTRANS/S\tMEAN LATENCY µs\tCPU µs/KiB"+hostHeader+"\tSPEED-UP")
	var points []results.Point
	seen := map[results.Point]bool{}
	for _, r := range doc.Runs {
		if !seen[r.Point()] {
			seen[r.Point()] = true
			points = append(points, r.Point())
		}
	}
	speed := map[string][]string{}
	for _, s := range Speedups(doc.Runs, nil) {
		k := s.Point.String() + "|" + s.Path
		speed[k] = append(speed[k], fmt.Sprintf("%.2fx vs %s", s.Ratio, s.Reference))
	}
	best := results.Best(doc.Runs)
	paths := results.Paths(doc.Runs)
	// References first, as the papers print the baseline before the fast path.
	sort.SliceStable(paths, func(i, j int) bool { return results.IsReference(paths[i]) && !results.IsReference(paths[j]) })
	for _, pt := range points {
		for _, p := range paths {
			r, ok := best[p][pt]
			if !ok {
				continue
			}
			rate, tps, lat := fmt.Sprintf("%.2f (%.2f-%.2f)", r.ThroughputMbps/1000, r.ThroughputMinMbps/1000, r.ThroughputMaxMbps/1000), "-", "-"
			if results.IsRR(r.Test) {
				// Request/response payload rates are tiny; transactions and latency tell.
				rate = "-"
				tps = fmt.Sprintf("%.0f", r.TransactionsPerSec)
				if r.MeanLatencyUs > 0 {
					lat = fmt.Sprintf("%.1f", r.MeanLatencyUs)
				}
			}
			mtu := "-"
			if r.MTU > 0 {
				mtu = fmt.Sprint(r.MTU)
			}
			sock := "default"
			if pt.SocketBytes > 0 {
				sock = results.FormatBytes(pt.SocketBytes)
			}
			cpu := "-"
			if r.ServiceDemandUsPerKB > 0 {
				cpu = fmt.Sprintf("%.3f", r.ServiceDemandUsPerKB)
			}
			if r.Test == results.UDPStream {
				rate += fmt.Sprintf(" loss %.1f%%", r.LossPercent)
			}
			sp := strings.Join(speed[pt.String()+"|"+p], ", ")
			if sp == "" {
				sp = "-"
			}
			if host {
				perGB, perCore := "-", "-"
				if hasHostCPU(r) {
					perGB, perCore = fmt.Sprintf("%.3f", r.HostCPUSecondsPerGB), fmt.Sprintf("%.3f", r.GbpsPerHostCore)
				}
				cpu += "\t" + perGB + "\t" + perCore
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				pt.Test, sock, results.FormatBytes(pt.MessageBytes), pt.Sessions, pt.Pairs, p, mtu, rate, tps, lat, cpu, sp)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if host && doc.Machine.Guests == results.GuestsTCG {
		_, err := fmt.Fprintf(w, "host CPU: %s (the node has no KVM; compare paths, not absolute figures)\n", TCGLabel)
		return err
	}
	return nil
}
