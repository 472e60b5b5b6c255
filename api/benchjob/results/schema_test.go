package results_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

var update = flag.Bool("update", false, "rewrite the golden files testdata/* with the current output")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	g := gomega.NewWithT(t)
	path := filepath.Join("testdata", name)
	if *update {
		g.Expect(os.WriteFile(path, got, 0o644)).To(gomega.Succeed())
	}
	want, err := os.ReadFile(path)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "run go test -update to create %s", path)
	g.Expect(string(got)).To(gomega.Equal(string(want)), "%s differs; go test -update rewrites it", path)
}

// sampleDoc is a run of each kind the CSV tells apart: a stream with CPU
// figures on the fast path and the baseline, an RR point, a UDP stream
// with loss, two pairs, and a vsock stream.
func sampleDoc() results.Document {
	session := func(pair int, mbps, tps, mean, p99 float64) results.Session {
		return results.Session{Pair: pair, Session: 1, Endpoint: "10.250.0.3:12865", ThroughputMbps: mbps, TransactionsPerSec: tps, MeanLatencyUs: mean, P99LatencyUs: p99, ElapsedSec: 10.02}
	}
	run := func(path, test string, msg, pairs int, reps ...[]results.Session) results.Run {
		r := results.Run{Path: path, Test: test, SocketBytes: 262144, MessageBytes: msg, Sessions: 1, Pairs: pairs, MTU: 9000}
		for i, ss := range reps {
			s, err := results.NewSample(i+1, pairs, ss)
			if err != nil {
				panic(err)
			}
			r.Samples = append(r.Samples, s)
		}
		r.Summarize()
		return r
	}
	stream := run("fastpath", results.TCPStream, 65536, 1,
		[]results.Session{session(1, 13200, 0, 0, 0)}, []results.Session{session(1, 13520, 0, 0, 0)}, []results.Session{session(1, 13610, 0, 0, 0)})
	stream.ServiceDemandUsPerKB, stream.ServiceDemandMinUsPerKB, stream.ServiceDemandMaxUsPerKB, stream.CPUUtilPercent, stream.CPUScope = 0.62, 0.6, 0.66, 48.5, results.CPUScopeHost
	base := run("baseline", results.TCPStream, 65536, 1,
		[]results.Session{session(1, 4580, 0, 0, 0)}, []results.Session{session(1, 4610, 0, 0, 0)}, []results.Session{session(1, 4490, 0, 0, 0)})
	base.ServiceDemandUsPerKB, base.CPUScope = 1.01, results.CPUScopeHost
	rr := run("fastpath", results.TCPRR, 1, 1,
		[]results.Session{session(1, 0.42, 26250, 38.1, 61)}, []results.Session{session(1, 0.41, 25600, 39, 64)}, []results.Session{session(1, 0.43, 26900, 37.2, 58)})
	udp := run("fastpath", results.UDPStream, 1472, 1,
		[]results.Session{session(1, 3100, 0, 0, 0)}, []results.Session{session(1, 3180, 0, 0, 0)}, []results.Session{session(1, 3150, 0, 0, 0)})
	udp.LossPercent, udp.LossMaxPercent = 0.12, 0.3
	pairs := run("fastpath", results.TCPStream, 65536, 2,
		[]results.Session{session(1, 6000, 0, 0, 0), session(2, 6100, 0, 0, 0)}, []results.Session{session(1, 6050, 0, 0, 0), session(2, 5990, 0, 0, 0)})
	vsock := run("fastpath-vsock", results.VSockStream, 65536, 1, []results.Session{session(1, 9100, 0, 0, 0)})
	vsock.MTU = 0
	return results.Document{
		Machine: results.Machine{Hostname: "pb-ci-1-x7k2p", Kernel: "6.1.0-18-amd64", CPUs: 2, GoVersion: "go1.26.0",
			Timestamp: time.Date(2026, 11, 28, 12, 0, 5, 0, time.UTC), Netperf: "Netperf version 2.7.0"},
		Runs: []results.Run{stream, base, rr, udp, pairs, vsock},
	}
}

// The CSV of a document, k8s-netperf's columns first (golden file).
func TestWriteCSV(t *testing.T) {
	g := gomega.NewWithT(t)
	var buf bytes.Buffer
	g.Expect(results.WriteCSV(&buf, sampleDoc(), results.CSVOptions{VM: true})).To(gomega.Succeed())
	golden(t, "results.csv", buf.Bytes())
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	g.Expect(lines).To(gomega.HaveLen(1 + len(sampleDoc().Runs)))
	g.Expect(lines[0]).To(gomega.HavePrefix("Driver,Profile,Same node,Host Network,Service,Duration,Parallelism,# of Samples,Message Size,Avg Throughput,Throughput Metric,99%tile Observed Latency,Latency Metric,"))
}

// An RR row is in transactions per second (OP/s) with its P99; a stream's
// in Mb/s, the mean of its repetitions.
func TestWriteCSVUnits(t *testing.T) {
	g := gomega.NewWithT(t)
	var buf bytes.Buffer
	g.Expect(results.WriteCSV(&buf, sampleDoc(), results.CSVOptions{})).To(gomega.Succeed())
	lines := strings.Split(buf.String(), "\n")
	g.Expect(lines[1]).To(gomega.HavePrefix("netperf,TCP_STREAM,true,false,false,10,1,3,65536,13443.333333,Mb/s,,usec,fastpath,false,262144,1,1,9000,13520.000000,13200.000000,13610.000000,"))
	g.Expect(lines[3]).To(gomega.HavePrefix("netperf,TCP_RR,true,false,false,10,1,3,1,26250.000000,OP/s,61.000000,usec,"))
	g.Expect(lines[5]).To(gomega.HavePrefix("netperf,TCP_STREAM,true,false,false,10,2,2,65536,"), "parallelism is sessions × pairs")
	g.Expect(lines[6]).To(gomega.HavePrefix("fastpath-bench,VSOCK_STREAM,"))
}

// Encode writes the schema version; Decode reads documents without one
// and refuses a version it does not know.
func TestSchemaVersion(t *testing.T) {
	g := gomega.NewWithT(t)
	var buf bytes.Buffer
	g.Expect(results.Encode(&buf, sampleDoc())).To(gomega.Succeed())
	golden(t, "results.json", buf.Bytes())
	g.Expect(buf.String()).To(gomega.HavePrefix("{\n  \"schemaVersion\": 1,\n"))
	doc, err := results.Decode(bytes.NewReader(buf.Bytes()))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.SchemaVersion).To(gomega.Equal(results.SchemaVersion))

	unversioned := strings.Replace(buf.String(), "\"schemaVersion\": 1,", "", 1)
	doc, err = results.Decode(strings.NewReader(unversioned))
	g.Expect(err).NotTo(gomega.HaveOccurred(), "a document from before schemaVersion is version 1")
	g.Expect(doc.SchemaVersion).To(gomega.Equal(0))

	newer := strings.Replace(buf.String(), "\"schemaVersion\": 1,", fmt.Sprintf("\"schemaVersion\": %d,", results.SchemaVersion+1), 1)
	_, err = results.Decode(strings.NewReader(newer))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("schemaVersion 2 is not one this reader knows")))
}

// docs/benchmarks.md documents every field of results.json (its JSON name
// in backquotes) and every CSV column.
func TestDocsDescribeTheSchema(t *testing.T) {
	g := gomega.NewWithT(t)
	raw, err := os.ReadFile("../../../docs/benchmarks.md")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	doc := string(raw)
	start := strings.Index(doc, "\n### results.json")
	g.Expect(start).To(gomega.BeNumerically(">=", 0), "docs/benchmarks.md has a section ### results.json")
	section := doc[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	for _, typ := range []reflect.Type{reflect.TypeOf(results.Document{}), reflect.TypeOf(results.Machine{}), reflect.TypeOf(results.Run{}),
		reflect.TypeOf(results.Sample{}), reflect.TypeOf(results.Session{}), reflect.TypeOf(results.GuestCheck{}), reflect.TypeOf(results.VsockCheck{}),
		reflect.TypeOf(results.HostCPUWindow{}), reflect.TypeOf(results.HostCPUReading{}), reflect.TypeOf(results.PodCPU{})} {
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			g.Expect(section).To(gomega.ContainSubstring("`"+name+"`"), "the results.json section lacks %s.%s (%s)", typ.Name(), typ.Field(i).Name, name)
		}
	}
	for _, c := range results.CSVColumns {
		g.Expect(section).To(gomega.ContainSubstring("| `"+c+"` |"), "the CSV table lacks column %q", c)
	}
}
