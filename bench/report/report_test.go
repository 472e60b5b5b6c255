package report_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/report"
)

func loadFixture(t *testing.T) results.Document {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "results.json"))
	if err != nil {
		t.Fatalf("failed to open fixture: %v", err)
	}
	defer f.Close()
	doc, err := results.Decode(f)
	if err != nil {
		t.Fatalf("failed to decode fixture: %v", err)
	}
	return doc
}

func TestRenderFixture(t *testing.T) {
	g := gomega.NewWithT(t)
	doc := loadFixture(t)
	r, err := report.Render(doc, report.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())

	var names []string
	for _, c := range r.Charts {
		names = append(names, c.Name)
		g.Expect(string(c.SVG)).To(gomega.ContainSubstring("<svg"))
	}
	expectShortTickLabels(g, r.HTML)
	g.Expect(names).To(gomega.Equal([]string{
		"throughput-tcp-stream-1-session", "throughput-tcp-stream-5-sessions", "throughput-tcp-maerts-1-session",
		"latency-tcp-rr",
		"scale-out-tcp-stream-256kib-64kib-1-session",
		"cpu-ratio",
	}))
	// fastpath-linux-bridge ran at two MTUs: the best one counts.
	g.Expect(r.Lines).To(gomega.Equal([]string{
		"ratio fastpath-linux-bridge/baseline-untuned 3.53",
		"ratio fastpath-linux-bridge/baseline-masquerade 1.62",
		"ratio fastpath-linux-bridge/ceiling 0.97",
		"latency fastpath-linux-bridge/baseline-untuned 0.81",
		"latency fastpath-linux-bridge/baseline-masquerade 0.66",
		"latency fastpath-linux-bridge/ceiling 1.14",
		// 2.6 over 4.5 µs/KiB in every repetition.
		"cpu fastpath-linux-bridge/baseline-masquerade 0.58 [0.58-0.58]",
	}))

	md := string(r.Markdown)
	g.Expect(md).To(gomega.HavePrefix("# Fastpath benchmark\n"))
	g.Expect(md).To(gomega.ContainSubstring("> **Emulated:** SYNTHETIC fixture"))
	g.Expect(md).To(gomega.ContainSubstring("ratio fastpath-linux-bridge/baseline-untuned 3.53\n"))
	g.Expect(md).To(gomega.ContainSubstring("| point | fastpath-linux-bridge / baseline-untuned | fastpath-linux-bridge / baseline-masquerade | fastpath-linux-bridge / ceiling |"))
	g.Expect(md).To(gomega.ContainSubstring("| **TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1** | **3.53×** |"))
	g.Expect(md).To(gomega.ContainSubstring("![TCP_STREAM throughput vs message size, 1 session](throughput-tcp-stream-1-session.svg)"))
	// One table row per run.
	g.Expect(strings.Count(md, "\n| fastpath-linux-bridge | TCP_")).To(gomega.Equal(2 * (16 + 4 + 4 + 1)))
	// The CPU figure, its explanation, transmit beside receive.
	g.Expect(md).To(gomega.ContainSubstring("## CPU per byte\n\n![CPU per byte relative to baseline-masquerade (lower is better)](cpu-ratio.svg)"))
	g.Expect(md).To(gomega.ContainSubstring("Client and server shared one host, so the figure is the host's whole CPU (/proc/stat), measured once"))
	g.Expect(md).To(gomega.ContainSubstring("| path | MTU | socket | message | sessions | transmit Mbit/s | receive Mbit/s | transmit µs/KiB | receive µs/KiB |"))
	g.Expect(md).To(gomega.ContainSubstring("| baseline-masquerade | 1500 | 256KiB | 64KiB | 1 | 9800 | 9016 | 4.500 | 4.950 |"))
	g.Expect(md).To(gomega.ContainSubstring("| 4.500 [4.365–4.680] | 80 (host) | – | – | 3 |"))

	dir := t.TempDir()
	files, err := r.WriteDir(dir)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(files).To(gomega.HaveLen(2 + len(r.Charts)))
	for _, m := range regexp.MustCompile(`\]\(([^)]+\.svg)\)`).FindAllStringSubmatch(md, -1) {
		g.Expect(filepath.Join(dir, m[1])).To(gomega.BeAnExistingFile())
	}
}

// svgText matches the text of an SVG <text> element, as vgsvg writes it.
var svgText = regexp.MustCompile(`<text[^>]*>([^<]*)</text>`)

// expectShortTickLabels checks that page (HTML or SVG) has numeric tick
// labels and that none is longer than 6 characters: a step such as 0.2 must
// not print as 0.6000000000000001 (issue 44). A text that parses as a number
// is a tick label of a numeric axis; nominal axes and legends say "64KiB".
func expectShortTickLabels(g gomega.Gomega, page []byte) {
	var labels []string
	for _, m := range svgText.FindAllSubmatch(page, -1) {
		if _, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
			labels = append(labels, string(m[1]))
		}
	}
	g.Expect(labels).NotTo(gomega.BeEmpty())
	for _, l := range labels {
		g.Expect(len(l)).To(gomega.BeNumerically("<=", 6), "tick label %q", l)
	}
}

// The fixture's latencies over 200 (at most 0.76 µs) put the latency chart's
// y axis in steps of 0.2, which printed 0.6000000000000001.
func TestTickLabelsOfFractionalStepsAreShort(t *testing.T) {
	g := gomega.NewWithT(t)
	doc := loadFixture(t)
	for i := range doc.Runs {
		r := &doc.Runs[i]
		for _, v := range []*float64{&r.MeanLatencyUs, &r.MeanLatencyMinUs, &r.MeanLatencyMaxUs, &r.P99LatencyUs, &r.P99LatencyMinUs, &r.P99LatencyMaxUs} {
			*v /= 200
		}
	}
	r, err := report.Render(doc, report.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, c := range r.Charts {
		if c.Kind == "latency" {
			g.Expect(string(c.SVG)).To(gomega.MatchRegexp(`>0\.6[0-9]*</text>`), "the y axis has a tick at 0.6")
		}
	}
	expectShortTickLabels(g, r.HTML)
}

// The HTML page must load nothing from anywhere: no URLs, no external
// sources or links, and CSS url() only for data: URLs.
func TestHTMLIsSelfContained(t *testing.T) {
	g := gomega.NewWithT(t)
	r, err := report.Render(loadFixture(t), report.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	page := string(r.HTML)
	g.Expect(page).NotTo(gomega.ContainSubstring("http://"))
	g.Expect(page).NotTo(gomega.ContainSubstring("https://"))
	g.Expect(page).NotTo(gomega.MatchRegexp(`(?i)\s(src|href)\s*=`))
	g.Expect(page).NotTo(gomega.MatchRegexp(`url\((?:[^d]|d[^a])`))
	g.Expect(page).To(gomega.ContainSubstring("url(data:font/ttf;base64,"))
	g.Expect(strings.Count(page, "<svg")).To(gomega.Equal(len(r.Charts)))
	g.Expect(page).To(gomega.ContainSubstring(`<p class="emulated"><strong>Emulated:</strong> SYNTHETIC fixture`))
}

func TestRenderRejectsBrokenDocuments(t *testing.T) {
	g := gomega.NewWithT(t)
	_, err := report.Render(results.Document{}, report.Options{})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("no runs")))
	doc := loadFixture(t)
	doc.Runs[3].ThroughputMbps = 0
	_, err = report.Render(doc, report.Options{})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("throughputMbps must be positive")))
}

// chartPixels counts the screenshot's pixels close to a palette colour.
func chartPixels(img image.Image) (perColour []int, nonWhite int) {
	perColour = make([]int, len(report.Palette))
	b := img.Bounds()
	near := func(a, b uint32) bool { d := int(a>>8) - int(b>>8); return d > -12 && d < 12 }
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 < 245 || g>>8 < 245 || bl>>8 < 245 {
				nonWhite++
			}
			for i, c := range report.Palette {
				cr, cg, cb, _ := color.Color(c).RGBA()
				if near(r, cr) && near(g, cg) && near(bl, cb) {
					perColour[i]++
				}
			}
		}
	}
	return perColour, nonWhite
}

// Opens the HTML in headless Chromium and checks that the charts were drawn:
// every series colour the fixture uses covers a real area of the page.
func TestHTMLRendersInChromium(t *testing.T) {
	g := gomega.NewWithT(t)
	chromium, err := exec.LookPath("chromium")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "Debian's chromium package is needed for this test")
	r, err := report.Render(loadFixture(t), report.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	dir := t.TempDir()
	_, err = r.WriteDir(dir)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	shot := filepath.Join(dir, "report.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "--window-size=1200,2000",
		"file://"+filepath.Join(dir, "report.html"))
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(gomega.HaveOccurred(), string(out))
	data, err := os.ReadFile(shot)
	g.Expect(err).NotTo(gomega.HaveOccurred(), string(out))
	img, err := png.Decode(bytes.NewReader(data))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(img.Bounds().Dx()).To(gomega.Equal(1200))
	if keep := os.Getenv("FASTPATH_REPORT_SCREENSHOT"); keep != "" {
		g.Expect(os.WriteFile(keep, data, 0o644)).To(gomega.Succeed())
	}
	perColour, nonWhite := chartPixels(img)
	total := img.Bounds().Dx() * img.Bounds().Dy()
	t.Logf("non-white pixels %d of %d; per palette colour %v", nonWhite, total, perColour)
	g.Expect(nonWhite).To(gomega.BeNumerically(">", total/20))
	// The fixture has 5 series (fastpath-linux-bridge at two MTUs), drawn in
	// the first 5 palette colours; the window shows the first charts.
	for i := 0; i < 5; i++ {
		g.Expect(perColour[i]).To(gomega.BeNumerically(">", 2000), "palette colour %d", i)
	}
}
