package report_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/report"
)

// Opens the CPU-ratio chart (the VMXNET3 paper's figures 3/5) in headless
// Chromium: one bar colour per path except the reference, which is the
// dashed line at 1.0 and has no bar.
func TestCPUChartRendersInChromium(t *testing.T) {
	g := gomega.NewWithT(t)
	chromium, err := exec.LookPath("chromium")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "Debian's chromium package is needed for this test")
	r, err := report.Render(loadFixture(t), report.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var svg []byte
	for _, c := range r.Charts {
		if c.Kind == "cpu" {
			svg = c.SVG
		}
	}
	g.Expect(svg).NotTo(gomega.BeEmpty())
	g.Expect(string(svg)).To(gomega.ContainSubstring("lower is better"))
	g.Expect(string(svg)).To(gomega.ContainSubstring("TCP_STREAM (transmit)"))
	g.Expect(string(svg)).To(gomega.ContainSubstring("TCP_MAERTS (receive)"))
	dir := t.TempDir()
	page := filepath.Join(dir, "cpu-ratio.svg")
	g.Expect(os.WriteFile(page, svg, 0o644)).To(gomega.Succeed())
	shot := filepath.Join(dir, "cpu.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "--window-size=960,442",
		"file://"+page)
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(gomega.HaveOccurred(), string(out))
	data, err := os.ReadFile(shot)
	g.Expect(err).NotTo(gomega.HaveOccurred(), string(out))
	img, err := png.Decode(bytes.NewReader(data))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	if keep := os.Getenv("FASTPATH_CPU_SCREENSHOT"); keep != "" {
		g.Expect(os.WriteFile(keep, data, 0o644)).To(gomega.Succeed())
	}
	perColour, nonWhite := chartPixels(img)
	total := img.Bounds().Dx() * img.Bounds().Dy()
	t.Logf("non-white pixels %d of %d; per palette colour %v", nonWhite, total, perColour)
	g.Expect(nonWhite).To(gomega.BeNumerically(">", total/20))
	// Series colours in order of first appearance: baseline-untuned 0,
	// baseline-masquerade 1 (the reference: no bar), fastpath-linux-bridge
	// at MTU 9000 and 65520 2 and 3, ceiling 4. The legend square alone is
	// about 100 pixels.
	for _, i := range []int{0, 2, 3, 4} {
		g.Expect(perColour[i]).To(gomega.BeNumerically(">", 1000), "palette colour %d", i)
	}
	g.Expect(perColour[1]).To(gomega.BeNumerically("<", 50), "the reference has no bar")
}

// Without service demands (runners before issue 15) there is no CPU chart
// and no CPU line, rather than a chart of zeros.
func TestNoCPUChartWithoutServiceDemand(t *testing.T) {
	g := gomega.NewWithT(t)
	doc := loadFixture(t)
	for i := range doc.Runs {
		doc.Runs[i].ServiceDemandUsPerKB = 0
		for j := range doc.Runs[i].Samples {
			doc.Runs[i].Samples[j].ServiceDemandUsPerKB = 0
		}
	}
	r, err := report.Render(doc, report.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, c := range r.Charts {
		g.Expect(c.Kind).NotTo(gomega.Equal("cpu"))
	}
	g.Expect(r.Lines).NotTo(gomega.ContainElement(gomega.HavePrefix("cpu ")))
	g.Expect(string(r.Markdown)).NotTo(gomega.ContainSubstring("## CPU per byte"))
	_ = results.CPUScopeHost
}
