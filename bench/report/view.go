package report

import (
	"fmt"
	"strings"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// view is what the Markdown and HTML templates show.
type view struct {
	Title    string
	Machine  results.Machine
	Emulated string
	Lines    []string
	Headline string
	// LatencyHeadline is the point latency lines are quoted at.
	LatencyHeadline string
	Speedup         table
	Charts          []Chart
	Sections        []section
	Runs            table
	// Directions puts transmit (TCP_STREAM) and receive (TCP_MAERTS) side
	// by side; CPUNote explains the CPU figures ("" without any).
	Directions table
	CPUNote    string
}

type section struct {
	Title  string
	Charts []Chart
}

// table is a header and rows of cells; Bold marks rows to emphasise.
type table struct {
	Header []string
	Rows   [][]string
	Bold   []bool
}

func newView(doc results.Document, opts Options, r *Report) view {
	v := view{Title: opts.Title, Machine: doc.Machine, Emulated: doc.Machine.Emulated, Lines: r.Lines, Charts: r.Charts}
	if hp, ok := Headline(doc.Runs); ok {
		v.Headline = hp.String()
	}
	if lp, ok := LatencyHeadline(doc.Runs); ok {
		v.LatencyHeadline = lp.String()
	}
	for _, s := range []struct{ kind, title string }{{"paths", "Paths against message size"}, {"throughput", "Throughput"}, {"cpu", "CPU per byte"}, {"latency", "Latency"}, {"scale-out", "Scale-out"}} {
		var cs []Chart
		for _, c := range r.Charts {
			if c.Kind == s.kind {
				cs = append(cs, c)
			}
		}
		if len(cs) > 0 {
			v.Sections = append(v.Sections, section{Title: s.title, Charts: cs})
		}
	}
	v.Speedup = speedupTable(doc.Runs, opts.IsReference)
	v.Runs = runsTable(doc.Runs)
	v.Directions = directionsTable(doc.Runs)
	v.CPUNote = strings.TrimSpace(cpuNote(doc.Runs) + " " + hostCPUNote(doc.Runs, doc.Machine))
	return v
}

// speedupTable has one row per point and one column per (path, reference)
// with the ratio of median throughputs, e.g. "2.93×".
func speedupTable(runs []results.Run, isRef func(string) bool) table {
	sp := Speedups(runs, isRef)
	var cols []string
	var points []results.Point
	cell := map[results.Point]map[string]string{}
	for _, s := range sp {
		col := s.Path + " / " + s.Reference
		if !contains(cols, col) {
			cols = append(cols, col)
		}
		if cell[s.Point] == nil {
			cell[s.Point] = map[string]string{}
			points = append(points, s.Point)
		}
		cell[s.Point][col] = fmt.Sprintf("%.2f×", s.Ratio)
	}
	t := table{Header: append([]string{"point"}, cols...)}
	hp, _ := Headline(runs)
	lp, _ := LatencyHeadline(runs)
	for _, p := range points {
		row := []string{p.String()}
		for _, c := range cols {
			v := cell[p][c]
			if v == "" {
				v = "–"
			}
			row = append(row, v)
		}
		t.Rows = append(t.Rows, row)
		t.Bold = append(t.Bold, p == hp || p == lp)
	}
	return t
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func runsTable(runs []results.Run) table {
	t := table{Header: []string{"path", "test", "socket", "message", "sessions", "pairs", "MTU", "throughput Mbit/s median [min–max]", "transactions/s", "mean latency µs [min–max]", "P99 µs", "service demand µs/KiB [min–max]", "CPU %", "own processes µs/KiB [min–max]", "UDP loss %", "repetitions"}}
	for _, r := range runs {
		sock := "default"
		if r.SocketBytes > 0 {
			sock = results.FormatBytes(r.SocketBytes)
		}
		mtu := "–"
		if r.MTU > 0 {
			mtu = fmt.Sprint(r.MTU)
		}
		tps, lat, p99 := "–", "–", "–"
		if r.TransactionsPerSec > 0 {
			tps = fmt.Sprintf("%.0f", r.TransactionsPerSec)
		}
		if r.MeanLatencyUs > 0 {
			lat = fmt.Sprintf("%s [%s–%s]", num(r.MeanLatencyUs), num(r.MeanLatencyMinUs), num(r.MeanLatencyMaxUs))
		}
		if r.P99LatencyUs > 0 {
			p99 = num(r.P99LatencyUs)
		}
		t.Rows = append(t.Rows, []string{r.Path, r.Test, sock, results.FormatBytes(r.MessageBytes), fmt.Sprint(r.Sessions), fmt.Sprint(r.Pairs), mtu,
			fmt.Sprintf("%s [%s–%s]", num(r.ThroughputMbps), num(r.ThroughputMinMbps), num(r.ThroughputMaxMbps)), tps, lat, p99})
		t.Rows[len(t.Rows)-1] = append(append(t.Rows[len(t.Rows)-1], cpuCells(r)...), fmt.Sprint(len(r.Samples)))
		t.Bold = append(t.Bold, false)
	}
	return t
}

// num formats a measurement with three significant digits or whole units.
func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// machineLine summarises the machine in one line.
func machineLine(m results.Machine) string {
	parts := []string{}
	add := func(label, v string) {
		if v != "" {
			parts = append(parts, label+v)
		}
	}
	add("host ", m.Hostname)
	add("kernel ", m.Kernel)
	if m.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", m.CPUs))
	}
	add("", m.GoVersion)
	add("", m.Netperf)
	if !m.Timestamp.IsZero() {
		parts = append(parts, m.Timestamp.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	return strings.Join(parts, " · ")
}
