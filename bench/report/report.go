package report

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"codeberg.org/go-fonts/liberation/liberationsansregular"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// Options tune a report.
type Options struct {
	// Title heads the report; empty means "Fastpath benchmark".
	Title string
	// IsReference picks the paths others are compared against; nil means
	// results.IsReference (names starting with "baseline", and "ceiling").
	IsReference func(path string) bool
	// PathCharts are drawn first, in their own section: throughput against
	// message size, one line per path, across tests (see PathChart).
	PathCharts []PathChart
	// ExtraLines are headline lines the caller computed (e.g. the demo's
	// "ratio vsock-sibling/vsock-relay 1.56 (3732-byte writes, ...)"),
	// shown after the report's own.
	ExtraLines []string
}

// Report is a rendered report.
type Report struct {
	// Markdown refers to the charts as "<Name>.svg" next to it.
	Markdown []byte
	// HTML is self-contained: charts inline, font as a data: URL.
	HTML []byte
	// Charts in the order they appear.
	Charts []Chart
	// Lines are the headline ratio lines (RatioLines, then LatencyLines,
	// then the CPU lines, then the host CPU lines), e.g. "ratio fastpath-linux-bridge/baseline-untuned
	// 2.93", "cpu fastpath-linux-bridge/baseline-masquerade 0.62 [0.55-0.70]".
	Lines []string
}

// Render renders doc. It fails for a document that does not validate
// (results.Document.Validate) or has no runs.
func Render(doc results.Document, opts Options) (*Report, error) {
	if err := doc.Validate(); err != nil {
		return nil, fmt.Errorf("failed to render report: %w", err)
	}
	if len(doc.Runs) == 0 {
		return nil, fmt.Errorf("failed to render report: the document has no runs")
	}
	if opts.Title == "" {
		opts.Title = "Fastpath benchmark"
	}
	if opts.IsReference == nil {
		opts.IsReference = results.IsReference
	}
	r := &Report{}
	all := seriesOf(doc.Runs)
	pcs, err := pathCharts(all, doc.Runs, opts.PathCharts)
	if err != nil {
		return nil, fmt.Errorf("failed to render report: %w", err)
	}
	r.Charts = append(r.Charts, pcs...)
	for _, f := range []func([]series, []results.Run) ([]Chart, error){throughputCharts, latencyCharts, scaleOutCharts} {
		cs, err := f(all, doc.Runs)
		if err != nil {
			return nil, fmt.Errorf("failed to render report: %w", err)
		}
		r.Charts = append(r.Charts, cs...)
	}
	cs, err := cpuCharts(all, doc.Runs, opts.IsReference)
	if err != nil {
		return nil, fmt.Errorf("failed to render report: %w", err)
	}
	r.Charts = append(r.Charts, cs...)
	hs, err := hostCPUCharts(all, doc.Runs, doc.Machine)
	if err != nil {
		return nil, fmt.Errorf("failed to render report: %w", err)
	}
	r.Charts = append(r.Charts, hs...)
	r.Lines = append(RatioLines(doc.Runs, opts.IsReference), LatencyLines(doc.Runs, opts.IsReference)...)
	r.Lines = append(r.Lines, cpuLines(doc.Runs, opts.IsReference)...)
	r.Lines = append(r.Lines, hostCPULines(doc.Runs, doc.Machine)...)
	r.Lines = append(r.Lines, opts.ExtraLines...)
	v := newView(doc, opts, r)
	md, err := markdown(v)
	if err != nil {
		return nil, err
	}
	r.Markdown = md
	page, err := htmlPage(v)
	if err != nil {
		return nil, err
	}
	r.HTML = page
	return r, nil
}

// WriteDir writes report.md, report.html and one <Name>.svg per chart into
// dir (created if missing) and returns the paths written.
func (r *Report) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create report directory %s: %w", dir, err)
	}
	files := map[string][]byte{"report.md": r.Markdown, "report.html": r.HTML}
	names := []string{"report.md", "report.html"}
	for _, c := range r.Charts {
		files[c.Name+".svg"] = c.SVG
		names = append(names, c.Name+".svg")
	}
	var written []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return written, fmt.Errorf("failed to write report file %s: %w", p, err)
		}
		written = append(written, p)
	}
	return written, nil
}

var (
	svgProlog = regexp.MustCompile(`(?s)^.*?<svg`)
	svgXMLNS  = regexp.MustCompile(`\s+xmlns(:xlink)?="[^"]*"`)
)

// inlineSVG turns a standalone SVG document into an element for an HTML5
// page: the XML prolog and comment go, and so do the namespace attributes,
// which HTML5 implies for <svg> and which are the only URLs in the file.
func inlineSVG(svg []byte) string {
	s := svgProlog.ReplaceAllString(string(svg), "<svg")
	s = svgXMLNS.ReplaceAllString(s, "")
	return strings.TrimSpace(s)
}

// fontFace is the CSS that embeds Liberation Sans, the font plot measured
// chart text with, so the browser needs no font from elsewhere.
func fontFace() string {
	return `@font-face { font-family: "Liberation Sans"; src: url(data:font/ttf;base64,` +
		base64.StdEncoding.EncodeToString(liberationsansregular.TTF) + `) format("truetype"); }`
}

// RenderFile reads the results document in the file at path ("-" is
// stdin), renders it and writes the report into dir (WriteDir). It returns
// the report and the files written; errors name the file.
func RenderFile(path, dir string, opts Options) (*Report, []string, error) {
	in := io.Reader(os.Stdin)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to open results %s: %w", path, err)
		}
		defer f.Close()
		in = f
	}
	doc, err := results.Decode(in)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read results %s: %w", path, err)
	}
	r, err := Render(doc, opts)
	if err != nil {
		return nil, nil, err
	}
	files, err := r.WriteDir(dir)
	if err != nil {
		return nil, nil, err
	}
	return r, files, nil
}
