package report_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/report"
)

// streamRun is a single-session run of path at one message size with three
// samples around mbps.
func streamRun(path, test string, msg int, mbps float64) results.Run {
	r := results.Run{Path: path, Test: test, MessageBytes: msg, Sessions: 1, Pairs: 1}
	for i, f := range []float64{0.9, 1, 1.2} {
		r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ThroughputMbps: mbps * f, PerSession: []results.Session{}})
	}
	r.Summarize()
	return r
}

func guestStreamDoc() results.Document {
	doc := results.Document{Machine: results.Machine{Hostname: "h", Guests: "qemu-tcg"}}
	for i, m := range []int{256, 1024, 3732} {
		f := float64(i + 1)
		doc.Runs = append(doc.Runs,
			streamRun("vsock-sibling", results.VSockStream, m, 10*f),
			streamRun("vsock-relay", results.VSockStream, m, 8*f),
			streamRun("fastpath", results.TCPStream, m, 12*f))
	}
	return doc
}

func TestPathChartDrawsOneLinePerPathAcrossTests(t *testing.T) {
	g := NewWithT(t)
	r, err := report.Render(guestStreamDoc(), report.Options{
		IsReference: func(p string) bool { return p == "vsock-relay" },
		PathCharts: []report.PathChart{{Name: "guest-streams", Title: "Guest to guest: throughput vs message size",
			Paths: []string{"vsock-sibling", "vsock-relay", "fastpath"}}},
		ExtraLines: []string{"ratio vsock-sibling/vsock-relay 1.25 (3732-byte writes)"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Charts).NotTo(BeEmpty())
	c := r.Charts[0]
	g.Expect(c.Name).To(Equal("guest-streams"))
	g.Expect(c.Kind).To(Equal("paths"))
	svg := string(c.SVG)
	for _, s := range []string{"vsock-sibling (VSOCK_STREAM)", "vsock-relay (VSOCK_STREAM)", "fastpath (TCP_STREAM)", "256B", "1KiB", "3732B", "Mbit/s"} {
		g.Expect(svg).To(ContainSubstring(s))
	}
	// Three lines of three points: one polyline per path.
	g.Expect(strings.Count(svg, "<path")).To(BeNumerically(">=", 3))
	g.Expect(r.Lines).To(ContainElement("ratio vsock-sibling/vsock-relay 1.25 (3732-byte writes)"))
	html := string(r.HTML)
	g.Expect(html).To(ContainSubstring("<h2>Paths against message size</h2>"))
	g.Expect(strings.Index(html, `id="guest-streams"`)).To(BeNumerically("<", strings.Index(html, "<h2>Throughput</h2>")))
	g.Expect(string(r.Markdown)).To(ContainSubstring("![Guest to guest: throughput vs message size](guest-streams.svg)"))
}

func TestPathChartRefusesWhatOneLineCannotShow(t *testing.T) {
	g := NewWithT(t)
	doc := guestStreamDoc()
	_, err := report.Render(doc, report.Options{PathCharts: []report.PathChart{{Title: "x", Paths: []string{"vsock-sibling", "nowhere"}}}})
	g.Expect(err).To(MatchError(ContainSubstring("no single-session stream runs of path nowhere")))

	doc.Runs = append(doc.Runs, streamRun("vsock-sibling", results.TCPStream, 512, 5))
	_, err = report.Render(doc, report.Options{PathCharts: []report.PathChart{{Title: "x", Paths: []string{"vsock-sibling"}}}})
	g.Expect(err).To(MatchError(ContainSubstring("path vsock-sibling mixes")))

	doc = guestStreamDoc()
	doc.Runs = append(doc.Runs, streamRun("fastpath", results.TCPStream, 256, 5))
	_, err = report.Render(doc, report.Options{PathCharts: []report.PathChart{{Title: "x", Paths: []string{"fastpath"}}}})
	g.Expect(err).To(MatchError(ContainSubstring("more than one run per message size")))
}
