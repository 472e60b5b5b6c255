package jobrunner_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/jobrunner"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// docWithSamples returns a valid document of one run with n samples of one
// session each.
func docWithSamples(n int) results.Document {
	r := results.Run{Path: "fastpath", Test: results.TCPStream, Sessions: 1, Pairs: 1}
	for i := range n {
		r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ThroughputMbps: 1000,
			PerSession: []results.Session{{Pair: 1, Session: 1, Endpoint: "10.250.0.3:12865", ThroughputMbps: 1000, ElapsedSec: 60, LocalSocketBytes: 524288, RemoteSocketBytes: 524288, MSSBytes: 65483}}})
	}
	r.Summarize()
	return results.Document{Runs: []results.Run{r}}
}

func TestOutcomeData(t *testing.T) {
	runErr := fmt.Errorf("failed to measure path fastpath:\n%w", &netperf.RunError{Endpoint: "10.0.0.1:12865", Executor: "local", Command: []string{"netperf"}, Err: netperf.ErrNetserverUnreachable})
	for _, tc := range []struct {
		name       string
		doc        results.Document
		err        error
		wantReason string
		wantError  string
		sessions   bool
	}{
		{"small document", docWithSamples(3), nil, "", "", true},
		{"too large with perSession", docWithSamples(5000), nil, "", "", false},
		{"too large even without perSession", docWithSamples(20000), nil, benchjob.ErrorReasonRunnerFailed, "larger than 1048576 bytes even without samples[].perSession", false},
		{"netserver unreachable", results.Document{}, runErr, benchjob.ErrorReasonNetserverUnreachable, "failed to measure path fastpath: failed to run netperf against 10.0.0.1:12865", false},
		{"host unresolvable", results.Document{}, netperf.ErrHostUnresolvable, benchjob.ErrorReasonNetserverUnreachable, "host does not resolve", false},
		{"anything else", results.Document{}, errors.New("ssh: connect to host 10.0.0.9 port 22: No route to host"), benchjob.ErrorReasonRunnerFailed, "No route to host", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			data, err := jobrunner.OutcomeData("run-7", tc.doc, tc.err)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(data).To(gomega.HaveKey(benchjob.RunIDKey))
			g.Expect(*data[benchjob.RunIDKey]).To(gomega.Equal("run-7"))
			g.Expect(data).To(gomega.HaveLen(4), "every key is set or nulled")
			if tc.wantReason != "" {
				g.Expect(data[benchjob.ResultsKey]).To(gomega.BeNil())
				g.Expect(*data[benchjob.ErrorReasonKey]).To(gomega.Equal(tc.wantReason))
				g.Expect(*data[benchjob.ErrorKey]).To(gomega.ContainSubstring(tc.wantError))
				g.Expect(*data[benchjob.ErrorKey]).NotTo(gomega.ContainSubstring("\n"))
				return
			}
			g.Expect(data[benchjob.ErrorKey]).To(gomega.BeNil())
			g.Expect(data[benchjob.ErrorReasonKey]).To(gomega.BeNil())
			js := *data[benchjob.ResultsKey]
			g.Expect(len(js)).To(gomega.BeNumerically("<=", jobrunner.MaxConfigMapBytes))
			doc, err := results.Decode(strings.NewReader(js))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(doc.Runs[0].Samples).To(gomega.HaveLen(len(tc.doc.Runs[0].Samples)))
			g.Expect(doc.Runs[0].Samples[0].PerSession != nil).To(gomega.Equal(tc.sessions))
			g.Expect(tc.doc.Runs[0].Samples[0].PerSession).To(gomega.HaveLen(1), "the caller's document is not changed")
		})
	}
}
