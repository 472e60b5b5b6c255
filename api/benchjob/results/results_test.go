package results_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

func TestNewSampleAggregatesSessions(t *testing.T) {
	g := gomega.NewWithT(t)
	s, err := results.NewSample(2, 2, []results.Session{
		{Pair: 1, Session: 1, ThroughputMbps: 1, TransactionsPerSec: 1000, MeanLatencyUs: 10, P99LatencyUs: 30},
		{Pair: 1, Session: 2, ThroughputMbps: 2, TransactionsPerSec: 3000, MeanLatencyUs: 20, P99LatencyUs: 50},
		{Pair: 2, Session: 1, ThroughputMbps: 4, TransactionsPerSec: 0},
	})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s.Repetition).To(gomega.Equal(2))
	g.Expect(s.ThroughputMbps).To(gomega.Equal(7.0))
	g.Expect(s.PerPairThroughputMbps).To(gomega.Equal([]float64{3, 4}))
	g.Expect(s.TransactionsPerSec).To(gomega.Equal(4000.0))
	// (10*1000 + 20*3000) / 4000
	g.Expect(s.MeanLatencyUs).To(gomega.BeNumerically("~", 17.5, 1e-9))
	g.Expect(s.P99LatencyUs).To(gomega.Equal(50.0))
	g.Expect(s.PerSession).To(gomega.HaveLen(3))
}

func TestNewSampleRejectsBadInput(t *testing.T) {
	g := gomega.NewWithT(t)
	_, err := results.NewSample(1, 1, nil)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("no sessions")))
	_, err = results.NewSample(1, 1, []results.Session{{Pair: 2, Session: 1, ThroughputMbps: 1}})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("names pair 2 of 1")))
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		samples                       []results.Sample
		pairs                         int
		median, min, max, lat, latMax float64
		perPair                       []float64
	}{
		{
			name:    "odd count takes the middle",
			samples: []results.Sample{{ThroughputMbps: 30}, {ThroughputMbps: 10}, {ThroughputMbps: 20}},
			pairs:   1, median: 20, min: 10, max: 30,
		},
		{
			name:    "even count averages the middle two",
			samples: []results.Sample{{ThroughputMbps: 40}, {ThroughputMbps: 10}, {ThroughputMbps: 20}, {ThroughputMbps: 30}},
			pairs:   1, median: 25, min: 10, max: 40,
		},
		{
			name: "latency and per-pair medians",
			samples: []results.Sample{
				{ThroughputMbps: 3, MeanLatencyUs: 5, PerPairThroughputMbps: []float64{1, 2}},
				{ThroughputMbps: 9, MeanLatencyUs: 7, PerPairThroughputMbps: []float64{4, 5}},
				{ThroughputMbps: 6, MeanLatencyUs: 9, PerPairThroughputMbps: []float64{3, 3}},
			},
			pairs: 2, median: 6, min: 3, max: 9, lat: 7, latMax: 9, perPair: []float64{3, 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			r := results.Run{Pairs: tc.pairs, Samples: tc.samples}
			r.Summarize()
			g.Expect(r.ThroughputMbps).To(gomega.Equal(tc.median))
			g.Expect(r.ThroughputMinMbps).To(gomega.Equal(tc.min))
			g.Expect(r.ThroughputMaxMbps).To(gomega.Equal(tc.max))
			g.Expect(r.MeanLatencyUs).To(gomega.Equal(tc.lat))
			g.Expect(r.MeanLatencyMaxUs).To(gomega.Equal(tc.latMax))
			g.Expect(r.PerPairThroughputMbps).To(gomega.Equal(tc.perPair))
		})
	}
}

func TestMedianDoesNotReorderInput(t *testing.T) {
	g := gomega.NewWithT(t)
	xs := []float64{3, 1, 2}
	g.Expect(results.Median(xs)).To(gomega.Equal(2.0))
	g.Expect(xs).To(gomega.Equal([]float64{3, 1, 2}))
	g.Expect(results.Median(nil)).To(gomega.Equal(0.0))
}

func run(path, test string, sock, msg, sessions, mtu int, mbps, latUs float64) results.Run {
	r := results.Run{Path: path, Test: test, SocketBytes: sock, MessageBytes: msg, Sessions: sessions, Pairs: 1, MTU: mtu,
		Samples: []results.Sample{{Repetition: 1, ThroughputMbps: mbps, MeanLatencyUs: latUs}}}
	r.Summarize()
	return r
}

func TestDocumentRoundTripKeepsContractFieldNames(t *testing.T) {
	g := gomega.NewWithT(t)
	r := run("fastpath", results.TCPRR, 65536, 1, 1, 9000, 0.5, 21.5)
	r.P99LatencyUs = 80
	doc := results.Document{
		Machine: results.Machine{Hostname: "h", Kernel: "6.1", CPUs: 2, GoVersion: "go1.26", Timestamp: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Emulated: "VMs emulated as network namespaces"},
		Runs:    []results.Run{r},
	}
	var buf bytes.Buffer
	g.Expect(results.Encode(&buf, doc)).To(gomega.Succeed())
	var raw map[string]any
	g.Expect(json.Unmarshal(buf.Bytes(), &raw)).To(gomega.Succeed())
	g.Expect(raw).To(gomega.HaveKey("machine"))
	g.Expect(raw["machine"]).To(gomega.HaveKeyWithValue("emulated", "VMs emulated as network namespaces"))
	g.Expect(raw["machine"]).To(gomega.HaveKeyWithValue("timestamp", "2025-01-02T03:04:05Z"))
	runJSON := raw["runs"].([]any)[0].(map[string]any)
	for _, k := range []string{"path", "test", "socketBytes", "messageBytes", "sessions", "mtu", "throughputMbps", "meanLatencyUs", "p99LatencyUs", "samples"} {
		g.Expect(runJSON).To(gomega.HaveKey(k))
	}
	g.Expect(raw).To(gomega.HaveKeyWithValue("schemaVersion", float64(results.SchemaVersion)))
	back, err := results.Decode(&buf)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	doc.SchemaVersion = results.SchemaVersion
	g.Expect(back).To(gomega.Equal(doc))
}

func TestValidateRejectsZeros(t *testing.T) {
	for name, mutate := range map[string]func(*results.Run){
		"zero throughput": func(r *results.Run) { r.ThroughputMbps = 0 },
		"NaN throughput":  func(r *results.Run) { r.ThroughputMbps = math.NaN() },
		"no samples":      func(r *results.Run) { r.Samples = nil },
		"no path":         func(r *results.Run) { r.Path = "" },
		"zero sessions":   func(r *results.Run) { r.Sessions = 0 },
		"RR without lat":  func(r *results.Run) { r.Test = results.TCPRR; r.MeanLatencyUs = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			r := run("p", results.TCPStream, 0, 512, 1, 0, 10, 0)
			mutate(&r)
			err := results.Document{Runs: []results.Run{r}}.Validate()
			g.Expect(err).To(gomega.HaveOccurred())
		})
	}
}

func TestDecodeRejectsZeroThroughput(t *testing.T) {
	g := gomega.NewWithT(t)
	_, err := results.Decode(strings.NewReader(`{"runs":[{"path":"p","test":"TCP_STREAM","sessions":1,"pairs":1,"throughputMbps":0,"samples":[{}]}]}`))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("throughputMbps must be positive")))
}

func TestFormatBytesAndIsRR(t *testing.T) {
	g := gomega.NewWithT(t)
	g.Expect(results.FormatBytes(512)).To(gomega.Equal("512B"))
	g.Expect(results.FormatBytes(4096)).To(gomega.Equal("4KiB"))
	g.Expect(results.FormatBytes(1 << 20)).To(gomega.Equal("1MiB"))
	g.Expect(results.FormatBytes(1500)).To(gomega.Equal("1500B"))
	g.Expect(results.IsRR(results.TCPRR)).To(gomega.BeTrue())
	g.Expect(results.IsRR(results.VSockRR)).To(gomega.BeTrue())
	g.Expect(results.IsRR(results.TCPStream)).To(gomega.BeFalse())
}

func TestJoinEmulated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		notes []string
		want  string
	}{
		{"nothing emulated", []string{"", " ", ""}, ""},
		{"env only", []string{"VMs as netns", "", ""}, "VMs as netns"},
		{"flag only", []string{"", "loopback", ""}, "loopback"},
		{"env then flag then vsock", []string{"VMs as netns", "loopback", "vsock over UNIX"}, "VMs as netns; loopback; vsock over UNIX"},
		{"repeat dropped", []string{"VMs as netns", " VMs as netns ", "loopback"}, "VMs as netns; loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			g.Expect(results.JoinEmulated(tc.notes...)).To(gomega.Equal(tc.want))
		})
	}
}

// BestOf keeps, repetition by repetition, the better candidate and says
// which one it was; points or repetitions not every candidate has are left
// out.
func TestBestOf(t *testing.T) {
	g := gomega.NewWithT(t)
	stream := func(path string, mtu int, mbps ...float64) results.Run {
		r := results.Run{Path: path, Test: results.TCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1, MTU: mtu}
		for i, v := range mbps {
			r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ThroughputMbps: v})
		}
		r.Summarize()
		return r
	}
	rr := func(path string, tps ...float64) results.Run {
		r := results.Run{Path: path, Test: results.TCPRR, SocketBytes: 262144, MessageBytes: 1, Sessions: 1, Pairs: 1, MTU: 9000}
		for i, v := range tps {
			// A higher rate with a higher mean latency: the rate decides.
			r.Samples = append(r.Samples, results.Sample{Repetition: i + 1, ThroughputMbps: v * 16 / 1e6, TransactionsPerSec: v, MeanLatencyUs: v / 1000})
		}
		r.Summarize()
		return r
	}
	runs := []results.Run{
		stream("ceiling-veth", 9000, 10000, 12000, 9000),
		stream("ceiling-loopback", 9000, 11000, 11000, 11000, 99999), // repetition 4 has no veth partner
		stream("ceiling-veth", 65520, 20000),                         // no loopback run at 65520
		rr("ceiling-veth", 50000, 40000),
		rr("ceiling-loopback", 45000, 60000),
		stream("fastpath-linux-bridge", 9000, 99999),
	}
	best := results.BestOf("ceiling", runs, "ceiling-veth", "ceiling-loopback")
	g.Expect(best).To(gomega.HaveLen(2))
	type rep struct {
		Value  float64
		Source string
	}
	reps := func(r results.Run) []rep {
		var out []rep
		for _, s := range r.Samples {
			v := s.ThroughputMbps
			if results.IsRR(r.Test) {
				v = s.TransactionsPerSec
			}
			out = append(out, rep{v, s.Source})
		}
		return out
	}
	g.Expect(best[0].Path).To(gomega.Equal("ceiling"))
	g.Expect(best[0].MTU).To(gomega.Equal(9000))
	g.Expect(reps(best[0])).To(gomega.Equal([]rep{{11000, "ceiling-loopback"}, {12000, "ceiling-veth"}, {11000, "ceiling-loopback"}}))
	g.Expect(best[0].ThroughputMbps).To(gomega.Equal(11000.0))
	g.Expect(best[0].ThroughputMaxMbps).To(gomega.Equal(12000.0))
	g.Expect(best[1].Test).To(gomega.Equal(results.TCPRR))
	g.Expect(reps(best[1])).To(gomega.Equal([]rep{{50000, "ceiling-veth"}, {60000, "ceiling-loopback"}}))
	g.Expect(results.IsReference("ceiling-loopback")).To(gomega.BeTrue())
	g.Expect(results.IsReference("ceilings")).To(gomega.BeFalse())
}
