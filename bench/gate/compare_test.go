package gate_test

import (
	"bytes"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/gate"
)

func compareRun(path string, msg int, mbps ...float64) results.Run {
	r := results.Run{Path: path, Test: results.TCPStream, SocketBytes: 262144, MessageBytes: msg, Sessions: 1, Pairs: 1}
	for i, v := range mbps {
		r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ThroughputMbps: v, ServiceDemandUsPerKB: 1000 / v})
	}
	r.Summarize()
	return r
}

// bench compare prints a line per point with its ratio and noise verdict,
// and the worst regression beyond the noise.
func TestWriteComparison(t *testing.T) {
	g := gomega.NewWithT(t)
	then := results.Document{Runs: []results.Run{compareRun("fastpath", 65536, 9900, 10000, 10100), compareRun("baseline", 65536, 4500, 4600, 4700), compareRun("fastpath", 512, 900)}}
	now := results.Document{Runs: []results.Run{compareRun("fastpath", 65536, 7900, 8000, 8100), compareRun("baseline", 65536, 4400, 4600, 4800)}}
	var out bytes.Buffer
	g.Expect(gate.WriteComparison(&out, "FastPathBenchmark ci-2", "ci-1.json", results.Compare(now, then))).To(gomega.Succeed())
	g.Expect(out.String()).To(gomega.Equal(`now: FastPathBenchmark ci-2
then: ci-1.json

PATH      POINT                                                THEN MBPS  NOW MBPS  RATIO  THEN RANGE  NOW RANGE  THROUGHPUT    CPU RATIO  CPU
fastpath  TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1  10000      8000      0.80   9900-10100  7900-8100  beyond noise  1.25       beyond noise
baseline  TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1  4600       4600      1.00   4500-4700   4400-4800  within noise  1.00       within noise

Worst regression beyond the noise: 25.0% (CPU per byte 1.25x) at fastpath TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1.
Not compared: 0 points measured only now, 1 only then.
`))
}
