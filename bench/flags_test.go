package bench_test

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/bench"
)

func TestParseSizes(t *testing.T) {
	g := gomega.NewWithT(t)
	got, err := bench.ParseSizes("512, 4K,16KiB,64k,1M,0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal([]int{512, 4096, 16384, 65536, 1 << 20, 0}))
	for _, bad := range []string{"", "x", "-1", "4G", "4KK", "9999999M"} {
		_, err := bench.ParseSizes(bad)
		g.Expect(err).To(gomega.HaveOccurred(), bad)
	}
}

func TestParseCounts(t *testing.T) {
	g := gomega.NewWithT(t)
	got, err := bench.ParseCounts("1,5")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal([]int{1, 5}))
	_, err = bench.ParseCounts("1,0")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`count "0"`)))
}

func TestParsePath(t *testing.T) {
	g := gomega.NewWithT(t)
	p, err := bench.ParsePath("fastpath=10.250.0.3,10.250.0.5:12866,[fd00::2]:12867,fd00::3")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(p.Name).To(gomega.Equal("fastpath"))
	g.Expect(p.Endpoints).To(gomega.Equal([]bench.Endpoint{{Host: "10.250.0.3"}, {Host: "10.250.0.5", Port: 12866}, {Host: "fd00::2", Port: 12867}, {Host: "fd00::3"}}))
	for _, bad := range []string{"fastpath", "=10.0.0.1", "x=", "x=h:0", "x=h:http", "x=[fd00::1"} {
		_, err := bench.ParsePath(bad)
		g.Expect(err).To(gomega.HaveOccurred(), bad)
	}
}

func TestParseNameInt(t *testing.T) {
	g := gomega.NewWithT(t)
	n, v, err := bench.ParseNameInt("fast=9000")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(n).To(gomega.Equal("fast"))
	g.Expect(v).To(gomega.Equal(9000))
	_, _, err = bench.ParseNameInt("fast")
	g.Expect(err).To(gomega.HaveOccurred())
}
