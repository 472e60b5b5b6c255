package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

func TestWriteResultsTable(t *testing.T) {
	g := gomega.NewWithT(t)
	run := func(path, test string, mtu int, mbps, tps, lat float64) results.Run {
		return results.Run{Path: path, Test: test, SocketBytes: 262144, MessageBytes: map[bool]int{true: 1, false: 65536}[test == results.TCPRR],
			Sessions: 1, Pairs: 1, MTU: mtu, ThroughputMbps: mbps, ThroughputMinMbps: mbps * 0.9, ThroughputMaxMbps: mbps * 1.1,
			TransactionsPerSec: tps, MeanLatencyUs: lat}
	}
	doc := results.Document{Runs: []results.Run{
		withSD(run("fastpath", results.TCPStream, 9000, 6000, 0, 0), 1.5),
		withSD(run("baseline", results.TCPStream, 0, 2000, 0, 0), 4.25),
		run("fastpath", results.TCPRR, 9000, 0.4, 25000, 40),
		run("baseline", results.TCPRR, 0, 0.32, 20000, 50),
	}}
	var buf bytes.Buffer
	// CPU µs/KiB beside the throughput, "-" where not measured.
	g.Expect(WriteResultsTable(&buf, doc)).To(gomega.Succeed())
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	g.Expect(lines).To(gomega.HaveLen(5))
	g.Expect(lines[1]).To(gomega.MatchRegexp(`^TCP_STREAM\s+256KiB\s+64KiB\s+1\s+1\s+baseline\s+-\s+2\.00 \(1\.80-2\.20\)\s+-\s+-\s+4\.250\s+-$`), "the baseline comes first")
	g.Expect(lines[2]).To(gomega.MatchRegexp(`fastpath\s+9000\s+6\.00 \(5\.40-6\.60\)\s+-\s+-\s+1\.500\s+3\.00x vs baseline$`))
	g.Expect(lines[3]).To(gomega.MatchRegexp(`^TCP_RR\s+256KiB\s+1B\s+1\s+1\s+baseline\s+-\s+-\s+20000\s+50\.0\s+-\s+-$`))
	g.Expect(lines[4]).To(gomega.MatchRegexp(`fastpath\s+9000\s+-\s+25000\s+40\.0\s+-\s+1\.25x vs baseline$`))
}

func withSD(r results.Run, sd float64) results.Run {
	r.ServiceDemandUsPerKB = sd
	return r
}
