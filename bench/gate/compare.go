package gate

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// WriteComparison prints c, the run now compared with the run then (their
// names head the table), for `kubectl fastpath bench compare`: a line per
// path and matrix point both measured, with the median throughputs (Mbit/s),
// the ratio now/then, the min–max ranges of the repetitions and the noise
// verdict (within: the ranges overlap), and the same of the service demand
// (CPU per byte, µs/KB) where both runs measured it, e.g.
//
//	PATH      POINT                                                THEN MBPS  NOW MBPS  RATIO  THEN RANGE  NOW RANGE  THROUGHPUT    CPU RATIO  CPU
//	fastpath  TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1  10000      8000      0.80   9900-10100  7900-8100  beyond noise  1.25       beyond noise
//
// then a line on the worst regression beyond the noise, and how many points
// only one run measured.
func WriteComparison(w io.Writer, now, then string, c results.Comparison) error {
	fmt.Fprintf(w, "now: %s\nthen: %s\n\n", now, then)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tPOINT\tTHEN MBPS\tNOW MBPS\tRATIO\tTHEN RANGE\tNOW RANGE\tTHROUGHPUT\tCPU RATIO\tCPU")
	for _, p := range c.Points {
		cpuRatio, cpuNoise := "-", "-"
		if p.HasCPU {
			cpuRatio, cpuNoise = fmt.Sprintf("%.2f", p.CPURatio), noiseWords(p.CPUNoise)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\n", p.Path, p.Point, figure(p.Then.Median), figure(p.Now.Median), p.Ratio,
			span(p.Then), span(p.Now), noiseWords(p.Noise), cpuRatio, cpuNoise)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	worst, percent, what, ok := c.Worst(nil)
	switch {
	case !ok:
		fmt.Fprintln(w, "No point of a fast path in common: nothing compared.")
	case what == "":
		fmt.Fprintln(w, "No regression beyond the noise.")
	default:
		fmt.Fprintf(w, "Worst regression beyond the noise: %.1f%% (%s) at %s %s.\n", percent, what, worst.Path, worst.Point)
	}
	if c.OnlyNow > 0 || c.OnlyThen > 0 {
		fmt.Fprintf(w, "Not compared: %d points measured only now, %d only then.\n", c.OnlyNow, c.OnlyThen)
	}
	return nil
}

func span(f results.Figure) string {
	lo, hi := f.Min, f.Max
	if lo == 0 {
		lo = f.Median
	}
	if hi == 0 {
		hi = f.Median
	}
	return figure(lo) + "-" + figure(hi)
}

// figure renders a throughput in Mbit/s: whole from 100 on, else three
// significant digits (RR tests move little payload).
func figure(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func noiseWords(v string) string {
	if v == results.WithinNoise {
		return "within noise"
	}
	return "beyond noise"
}
