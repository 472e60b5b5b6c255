// Package report renders a results.Document as Markdown and as one
// self-contained HTML page with SVG charts drawn by gonum/plot:
//
//   - on request (Options.PathCharts), throughput against message size on a
//     log scale with one line per path across tests, like the figure of
//     VMware's VMCI socket paper (VMCI sockets beside TCP);
//   - throughput against message size, one tile per socket size, every path
//     side by side (the shape of Figure 1 of VMware's VMCI socket paper),
//     one chart per stream test and session count;
//   - round-trip latency of the RR tests per path (mean as bars, P99 as
//     markers);
//   - scale-out, aggregate and per-pair throughput against the number of
//     pairs (the multi-VM paper), when the document has pairs;
//   - a speed-up table (ratio of medians per point) and the headline ratio
//     lines, e.g. "ratio fastpath-linux-bridge/baseline-untuned 2.93".
//
// The comparisons every display shares live here too (compare.go:
// Speedups, Headline, LatencyHeadline, RatioLines, LatencyLines), with the
// plain-text results table of `kubectl fastpath bench report` and the demo
// (WriteResultsTable); results keeps the document, its aggregation (Best,
// Paths) and the path and point naming (IsReference, Point.String,
// FormatBytes) it needs itself.
//
// Bars are medians over repetitions, whiskers span min to max. The HTML
// embeds every chart inline and the Liberation Sans font the charts were
// laid out with as a data: URL, so it has no external references at all; the
// Markdown refers to the charts as separate .svg files next to it.
package report
