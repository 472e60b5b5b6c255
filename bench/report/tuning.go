package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// tuningBarWidth is the width of the longest bar of WriteTuningReport's
// chart, in characters.
const tuningBarWidth = 40

// WriteTuningReport prints a FastPathNetwork's status.tuning (issue 27):
// per node a table with one row per candidate (MTU, offloads asked, the
// offloads its path negotiated: "as asked", the negotiated set where it
// differs, "-" when not reported; repetitions, median throughput in Gbit/s
// with min-max, service demand in µs/KiB, mean TCP_RR latency in µs, and why
// it failed or was left out for its offloads), the recommendation with its
// margin and the node's message (a flat MTU curve), then a text chart of the
// median throughput per candidate with its min-max range, in the units and
// order of WriteResultsTable. A failed candidate has no bar. It fails only
// when w does.
func WriteTuningReport(w io.Writer, st *v1alpha1.NetworkTuningStatus, objective v1alpha1.TuningObjective) error {
	if st == nil || len(st.Nodes) == 0 {
		_, err := fmt.Fprintln(w, "No node measured yet.")
		return err
	}
	for _, n := range st.Nodes {
		when := "-"
		if n.MeasuredAt != nil {
			when = n.MeasuredAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(w, "Node %s (kernel %s, datapath %s), measured %s, objective %s\n", n.Node, orDash(n.Kernel), orDash(n.Datapath), when, objective)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MTU\tOFFLOADS\tNEGOTIATED\tREPS\tGBIT/S (MIN-MAX)\tCPU µs/KiB\tMEAN LATENCY µs\tFAILED\t")
		for _, ev := range n.Evidence {
			mark := ""
			if n.Recommended != nil && n.Recommended.MTU == ev.MTU && offloadsString(n.Recommended.Offloads) == offloadsString(ev.Offloads) {
				mark = " *"
			}
			negotiated := offloadsString(ev.NegotiatedOffloads)
			if ev.NegotiatedOffloads != nil && negotiated == offloadsString(ev.Offloads) {
				negotiated = "as asked"
			}
			why := ev.Failed
			if why == "" && ev.OffloadMismatch != "" {
				why = "offloads: " + ev.OffloadMismatch
			}
			fmt.Fprintf(tw, "%d%s\t%s\t%s\t%d\t%.2f (%.2f-%.2f)\t%s\t%s\t%s\t\n", ev.MTU, mark, offloadsString(ev.Offloads), negotiated, ev.Repetitions,
				float64(ev.MedianMbps)/1000, float64(ev.MinMbps)/1000, float64(ev.MaxMbps)/1000,
				orDash(ev.ServiceDemandUsPerKB), orDash(ev.MeanLatencyUs), orDash(why))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if n.Recommended != nil {
			margin := "no runner-up"
			switch {
			case n.MTUCurve == v1alpha1.WithinNoise:
				margin = "MTU curve flat within noise: " + n.MarginPercent + "% from the fastest"
			case n.MarginPercent != "":
				margin = n.MarginPercent + "% over the runner-up"
			}
			fmt.Fprintf(w, "Recommended: * MTU %d, offloads %s (%s)\n", n.Recommended.MTU, offloadsString(n.Recommended.Offloads), margin)
		} else {
			fmt.Fprintln(w, "Recommended: none (every candidate failed or had other offloads than it asked for)")
		}
		if n.Message != "" {
			fmt.Fprintf(w, "Why: %s\n", n.Message)
		}
		writeTuningChart(w, n.Evidence)
		fmt.Fprintln(w)
	}
	if st.Applied != nil {
		fmt.Fprintf(w, "Applied: new attachments default to MTU %d, offloads %s\n", st.Applied.MTU, offloadsString(st.Applied.Offloads))
		for _, d := range st.Differing {
			has := fmt.Sprintf("MTU %d", d.MTU)
			if d.Offloads != nil {
				has += ", offloads " + offloadsString(d.Offloads)
			}
			fmt.Fprintf(w, "  %s/%s has %s: %s\n", d.Namespace, d.Name, has, d.Restart)
		}
	}
	_, err := fmt.Fprint(w, "")
	return err
}

// writeTuningChart draws one bar per candidate: '#' up to the median,
// '-' on to the maximum, scaled to the largest maximum; the minimum is
// marked '|' inside the bar when it falls short of the median.
func writeTuningChart(w io.Writer, evidence []v1alpha1.TuningEvidence) {
	var top int64
	for _, ev := range evidence {
		if ev.Failed == "" && ev.MaxMbps > top {
			top = ev.MaxMbps
		}
	}
	if top == 0 {
		return
	}
	fmt.Fprintln(w, "Throughput (median #, min |, max -), Gbit/s:")
	scale := func(v int64) int { return int(v * tuningBarWidth / top) }
	for _, ev := range evidence {
		if ev.Failed != "" {
			fmt.Fprintf(w, "  %6d  (failed)\n", ev.MTU)
			continue
		}
		bar := []rune(strings.Repeat("#", scale(ev.MedianMbps)) + strings.Repeat("-", max(0, scale(ev.MaxMbps)-scale(ev.MedianMbps))))
		if m := scale(ev.MinMbps); m > 0 && m < scale(ev.MedianMbps) {
			bar[m-1] = '|'
		}
		fmt.Fprintf(w, "  %6d  %-*s %.2f\n", ev.MTU, tuningBarWidth, string(bar), float64(ev.MedianMbps)/1000)
	}
}

func offloadsString(o *v1alpha1.Offloads) string {
	if o == nil {
		return "-"
	}
	return o.Format("=", ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
