package benchfig

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestWriteAndReadDir(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)

	p, err := Write(File{Benchmark: "relay", Figures: []Figure{{Name: "ratio 64KiB", Value: 0.8, Unit: "ratio"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(filepath.Join(dir, "relay.json")))
	_, err = Write(File{Benchmark: "cni-latency", Figures: []Figure{{Name: "ADD p50", Value: 3, Unit: "ms"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "results.json"), []byte(`{"runs": []}`), 0o644)).To(Succeed())

	files, err := ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(2))
	g.Expect(files[0].Benchmark).To(Equal("cni-latency"))
	g.Expect(files[1].Figures).To(ConsistOf(Figure{Name: "ratio 64KiB", Value: 0.8, Unit: "ratio"}))
}

func TestWriteWithoutDirIsNoop(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(EnvDir, "")
	p, err := Write(File{Benchmark: "x"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(BeEmpty())
}

func TestWriteRejectsBadName(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(EnvDir, t.TempDir())
	_, err := Write(File{Benchmark: "../x"})
	g.Expect(err).To(MatchError(ContainSubstring("benchmark name")))
}
