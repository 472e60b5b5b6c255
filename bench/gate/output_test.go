package gate_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/gate"
)

// The text summary: the figures of `kubectl get fpb`, the deciding reason
// and message, a line per criterion and the exit code.
func TestWriteText(t *testing.T) {
	g := gomega.NewWithT(t)
	var out bytes.Buffer
	g.Expect(gate.WriteText(&out, reports()["criteria-missed"][0])).To(gomega.Succeed())
	g.Expect(out.String()).To(gomega.Equal(`NAMESPACE  NAME  PHASE   BEST GBPS  SPEEDUP  CPU RATIO
apps       ci    Failed  13.52      2.95x    0.62
Failed (ThresholdNotMet): ` + missedMessage + `

CRITERION          REQUIRED       MEASURED    VERDICT
minThroughputMbps  >= 10000 Mbps  13520 Mbps  met
minSpeedupPercent  >= 300%        294.5%      NOT MET
maxCPURatio        <= 0.80        -           NOT MET: no service demand of both the fast path and the baseline at the best point

exit 1: criteria not met
`))

	out.Reset()
	g.Expect(gate.WriteText(&out, reports()["attachment-missing"][0])).To(gomega.Succeed())
	g.Expect(out.String()).To(gomega.Equal(`NAMESPACE  NAME  PHASE    BEST GBPS  SPEEDUP  CPU RATIO
apps       ci    Pending  -          -        -
Pending (WaitingForAttachment): FastPathAttachment db-link not found (still WaitingForAttachment after 2m0s)

exit 2: could not run
`))
}

// -o json and -o yaml print the benchmark as kubectl get does: with
// apiVersion and kind, without managedFields.
func TestWriteJSONAndYAML(t *testing.T) {
	g := gomega.NewWithT(t)
	r := reports()["succeeded"][0]
	r.Benchmark.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-fastpath"}}
	for _, f := range []gate.Format{gate.FormatJSON, gate.FormatYAML} {
		var out bytes.Buffer
		g.Expect(gate.Write(&out, f, r)).To(gomega.Succeed())
		g.Expect(out.String()).NotTo(gomega.ContainSubstring("managedFields"))
		data := out.Bytes()
		if f == gate.FormatYAML {
			var err error
			data, err = yaml.YAMLToJSON(data)
			g.Expect(err).NotTo(gomega.HaveOccurred())
		} else {
			g.Expect(json.Valid(data)).To(gomega.BeTrue())
		}
		var b fastpathv1alpha1.FastPathBenchmark
		g.Expect(json.Unmarshal(data, &b)).To(gomega.Succeed())
		g.Expect(b.APIVersion).To(gomega.Equal("fastpath.io/v1alpha1"))
		g.Expect(b.Kind).To(gomega.Equal("FastPathBenchmark"))
		g.Expect(b.Status.BestGbps).To(gomega.Equal("13.52"))
		g.Expect(b.Status.Points).To(gomega.HaveLen(4))
	}
	g.Expect(r.Benchmark.ManagedFields).To(gomega.HaveLen(1), "Write does not change the report")

	var out bytes.Buffer
	g.Expect(gate.Write(&out, gate.FormatJUnit, r)).To(gomega.Succeed())
	g.Expect(out.String()).To(gomega.HavePrefix(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<testsuites"))
}

// -o takes the formats and names them when given another.
func TestFormatSet(t *testing.T) {
	g := gomega.NewWithT(t)
	var f gate.Format
	for _, v := range []string{"text", "json", "yaml", "junit", "csv"} {
		g.Expect(f.Set(v)).To(gomega.Succeed())
		g.Expect(f.String()).To(gomega.Equal(v))
	}
	g.Expect(f.Set("xml")).To(gomega.MatchError("must be one of text|json|yaml|junit|csv"))
	g.Expect(f.String()).To(gomega.Equal("csv"), "a rejected value leaves the flag alone")
	g.Expect(gate.FormatNames()).To(gomega.Equal(strings.Join([]string{"text", "json", "yaml", "junit", "csv"}, "|")))
}

// -o csv writes the run's results with the VM column from the mode, and
// the header alone for a benchmark without results.
func TestWriteCSV(t *testing.T) {
	g := gomega.NewWithT(t)
	r := reports()["succeeded"][0]
	r.Benchmark.Spec.Mode = fastpathv1alpha1.BenchmarkModeVM
	doc := results.Document{Runs: []results.Run{{Path: "fastpath", Test: results.TCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1,
		ThroughputMbps: 13520, ThroughputMinMbps: 13520, ThroughputMaxMbps: 13520, Samples: []results.Sample{{Repetition: 1, ThroughputMbps: 13520}}}}}
	r.Results = &doc
	var out bytes.Buffer
	g.Expect(gate.Write(&out, gate.FormatCSV, r)).To(gomega.Succeed())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	g.Expect(lines).To(gomega.HaveLen(2))
	g.Expect(lines[0]).To(gomega.Equal(strings.Join(results.CSVColumns, ",")))
	g.Expect(lines[1]).To(gomega.HavePrefix("netperf,TCP_STREAM,true,false,false,,1,1,65536,13520.000000,Mb/s,,usec,fastpath,true,"))

	out.Reset()
	g.Expect(gate.Write(&out, gate.FormatCSV, reports()["could-not-run"][0])).To(gomega.Succeed())
	g.Expect(out.String()).To(gomega.Equal(strings.Join(results.CSVColumns, ",") + "\n"))
}
