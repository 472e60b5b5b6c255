package bench_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// testdata/ethtool-k-lo.txt is `ethtool -k lo` as ethtool 6.1 printed it
// on Linux 6.18.
func TestParseEthtoolK(t *testing.T) {
	g := gomega.NewWithT(t)
	lo, err := os.ReadFile("testdata/ethtool-k-lo.txt")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(bench.ParseEthtoolK(lo)).To(gomega.Equal(map[string]string{"tso": "on", "gso": "on", "gro": "on", "txChecksum": "on", "rxChecksum": "on"}))

	// A group ethtool could not switch as asked, single features (indented)
	// and groups of no offload of the table.
	out := "Features for eth1:\nrx-checksumming: on [fixed]\ntcp-segmentation-offload: off\n\ttx-tcp-segmentation: on\ngeneric-receive-offload: off [requested on]\nlarge-receive-offload: off [fixed]\n"
	g.Expect(bench.ParseEthtoolK([]byte(out))).To(gomega.Equal(map[string]string{"rxChecksum": "on", "tso": "off", "gro": "off"}))
	g.Expect(bench.ParseEthtoolK(nil)).To(gomega.BeEmpty())
}

// recorder is an Executor that records what it is asked to run.
type recorder struct{ argv [][]string }

func (r *recorder) Run(_ context.Context, argv []string) ([]byte, []byte, error) {
	r.argv = append(r.argv, argv)
	return nil, nil, nil
}
func (r *recorder) String() string { return "recorder" }

// GuestOffloads runs the guest's own ip and ethtool; here the "guest" is
// this machine, so it must agree with LocalOffloads on the loopback
// interface. A server that is not an IP address never reaches the shell.
func TestGuestOffloads(t *testing.T) {
	g := gomega.NewWithT(t)
	var rec recorder
	_, _, err := bench.GuestOffloads(context.Background(), &rec, "127.0.0.1; reboot")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("not an IPv4 or IPv6 address")))
	g.Expect(rec.argv).To(gomega.BeEmpty())
	_, _, err = bench.GuestOffloads(context.Background(), &rec, "127.0.0.1")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("ethtool -k printed none of tso, gso, gro, txChecksum, rxChecksum")))
	g.Expect(rec.argv).To(gomega.HaveLen(1))
	g.Expect(rec.argv[0][len(rec.argv[0])-1]).To(gomega.Equal("127.0.0.1"), "the address is an argument, not part of the script")

	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on this machine: %v", tool, err)
		}
	}
	ifName, got, err := bench.GuestOffloads(context.Background(), netperf.Local{}, "127.0.0.1")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(ifName).To(gomega.Equal("lo"))
	want, err := bench.LocalOffloads("lo")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(want))
}
