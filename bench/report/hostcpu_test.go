package report

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

func hostCPUDoc(t *testing.T) results.Document {
	f, err := os.Open("../../api/benchjob/results/testdata/hostcpu-results.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := results.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// A VM-mode run with host CPU (TCG guests): a host CPU chart in the CPU
// section, a line per path, the note, each labelled emulated CPU (TCG).
func TestReportShowsHostCPU(t *testing.T) {
	g := gomega.NewWithT(t)
	doc := hostCPUDoc(t)
	r, err := Render(doc, Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var chart *Chart
	for i := range r.Charts {
		if r.Charts[i].Name == "host-cpu" {
			chart = &r.Charts[i]
		}
	}
	g.Expect(chart).NotTo(gomega.BeNil())
	g.Expect(chart.Kind).To(gomega.Equal("cpu"))
	g.Expect(chart.Title).To(gomega.Equal("Host CPU per byte (lower is better) — emulated CPU (TCG)"))
	g.Expect(string(chart.SVG)).To(gomega.ContainSubstring("host CPU seconds per GB"))
	g.Expect(r.Lines).To(gomega.ContainElements(
		"host-cpu fastpath 28.633 s/GB [28.618-29.327], 0.279 Gbit/s per host core (emulated CPU (TCG))",
		"host-cpu baseline 49.587 s/GB [49.038-51.596], 0.161 Gbit/s per host core (emulated CPU (TCG))",
	))
	md := string(r.Markdown)
	g.Expect(md).To(gomega.ContainSubstring("host-cpu.svg"))
	g.Expect(md).To(gomega.ContainSubstring("emulated CPU (TCG): the node has no KVM"))
	g.Expect(string(r.HTML)).To(gomega.ContainSubstring("Host CPU per byte"))

	// On KVM the same figures carry no TCG label.
	doc.Machine.Guests, doc.Machine.Emulated = results.GuestsKVM, ""
	r, err = Render(doc, Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(string(r.Markdown)).NotTo(gomega.ContainSubstring("TCG"))
	g.Expect(r.Lines).To(gomega.ContainElement(gomega.HavePrefix("host-cpu fastpath 28.633 s/GB")))

	// Without host CPU: no chart, no line.
	for i := range doc.Runs {
		doc.Runs[i].HostCPUSecondsPerGB = 0
	}
	r, err = Render(doc, Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, c := range r.Charts {
		g.Expect(c.Name).NotTo(gomega.Equal("host-cpu"))
	}
	g.Expect(strings.Join(r.Lines, "\n")).NotTo(gomega.ContainSubstring("host-cpu"))
}

func TestResultsTableShowsHostCPU(t *testing.T) {
	g := gomega.NewWithT(t)
	var buf bytes.Buffer
	g.Expect(WriteResultsTable(&buf, hostCPUDoc(t))).To(gomega.Succeed())
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	g.Expect(lines).To(gomega.HaveLen(4))
	g.Expect(lines[0]).To(gomega.MatchRegexp(`CPU µs/KiB\s+HOST CPU s/GB\s+GBIT/S PER HOST CORE\s+SPEED-UP$`))
	g.Expect(lines[1]).To(gomega.MatchRegexp(`baseline\s+-\s+0\.26 \(0\.25-0\.26\)\s+-\s+-\s+350\.000\s+49\.587\s+0\.161\s+-$`))
	g.Expect(lines[2]).To(gomega.MatchRegexp(`fastpath\s+9000\s+0\.45 \(0\.43-0\.45\)\s+-\s+-\s+350\.000\s+28\.633\s+0\.279\s+1\.73x vs baseline$`))
	g.Expect(lines[3]).To(gomega.Equal("host CPU: emulated CPU (TCG) (the node has no KVM; compare paths, not absolute figures)"))
}
