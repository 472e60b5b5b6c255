package netperf_test

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/bench/netperf"
	"github.com/fastpath-io/fastpath/internal/bench/results"
)

// capture is one case written by testdata/capture.sh.
type capture struct {
	cmd            []string
	stdout, stderr []byte
	rc             int
}

func loadCapture(t *testing.T, name string) capture {
	t.Helper()
	read := func(ext string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name+ext))
		if err != nil {
			t.Fatalf("failed to read capture %s%s: %v", name, ext, err)
		}
		return b
	}
	rc, err := strconv.Atoi(strings.TrimSpace(string(read(".rc"))))
	if err != nil {
		t.Fatalf("failed to parse exit status of capture %s: %v", name, err)
	}
	return capture{cmd: strings.Fields(string(read(".cmd"))), stdout: read(".stdout"), stderr: read(".stderr"), rc: rc}
}

// The values are those in the captured stdout files (Debian netperf 2.7.0 on
// loopback); regenerating the captures means updating this table.
func TestParseCapturedResults(t *testing.T) {
	for _, tc := range []struct {
		name string
		test string
		want netperf.Result
	}{
		{"tcp_stream_256k_64k", results.TCPStream, netperf.Result{ThroughputMbps: 8830.74, ElapsedSec: 1, LocalSocketBytes: 524288, RemoteSocketBytes: 524288, MSSBytes: 65483}},
		{"tcp_stream_64k_512", results.TCPStream, netperf.Result{ThroughputMbps: 928.60, ElapsedSec: 1, LocalSocketBytes: 131072, RemoteSocketBytes: 131072, MSSBytes: 63956}},
		{"tcp_stream_default_sock", results.TCPStream, netperf.Result{ThroughputMbps: 4561.90, ElapsedSec: 1.01, LocalSocketBytes: 4194304, RemoteSocketBytes: 1924492, MSSBytes: 65483}},
		// -P 1: banner and header lines before the values.
		{"tcp_stream_banner", results.TCPStream, netperf.Result{ThroughputMbps: 3377.65, ElapsedSec: 1.01, LocalSocketBytes: 4194304, RemoteSocketBytes: 16276711, MSSBytes: 65483}},
		// -f g and -f M: converted to 10^6 bit/s.
		{"tcp_stream_gbits", results.TCPStream, netperf.Result{ThroughputMbps: 5170, ElapsedSec: 1, LocalSocketBytes: 4194304, RemoteSocketBytes: 1816470, MSSBytes: 65483}},
		{"tcp_stream_mbytes", results.TCPStream, netperf.Result{ThroughputMbps: 542.07 * 8 * 1.048576, ElapsedSec: 1.01, LocalSocketBytes: 4194304, RemoteSocketBytes: 11959098, MSSBytes: 65483}},
		// RR throughput is derived from the transaction rate.
		{"tcp_rr_1", results.TCPRR, netperf.Result{ThroughputMbps: 25222.442 * 2 * 8 / 1e6, ElapsedSec: 1, LocalSocketBytes: 524288, RemoteSocketBytes: 524288, MSSBytes: 65483,
			TransactionsPerSec: 25222.442, RequestBytes: 1, ResponseBytes: 1, MeanLatencyUs: 39.56, P99LatencyUs: 121}},
		{"tcp_rr_4k", results.TCPRR, netperf.Result{ThroughputMbps: 29031.165 * 8192 * 8 / 1e6, ElapsedSec: 1, LocalSocketBytes: 131072, RemoteSocketBytes: 131072, MSSBytes: 52232,
			TransactionsPerSec: 29031.165, RequestBytes: 4096, ResponseBytes: 4096, MeanLatencyUs: 34.36, P99LatencyUs: 108}},
		// Without -f, RR THROUGHPUT is in Trans/s; the result is the same shape.
		{"tcp_rr_transs", results.TCPRR, netperf.Result{ThroughputMbps: 44327.153 * 2 * 8 / 1e6, ElapsedSec: 1, LocalSocketBytes: 3939840, RemoteSocketBytes: 131072, MSSBytes: 32768,
			TransactionsPerSec: 44327.153, RequestBytes: 1, ResponseBytes: 1, MeanLatencyUs: 22.49, P99LatencyUs: 65}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			c := loadCapture(t, tc.name)
			g.Expect(c.rc).To(gomega.Equal(0))
			got, err := netperf.Parse(tc.test, c.stdout)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(got.ThroughputMbps).To(gomega.BeNumerically("~", tc.want.ThroughputMbps, 1e-6))
			got.ThroughputMbps = tc.want.ThroughputMbps
			g.Expect(got).To(gomega.Equal(tc.want))
		})
	}
}

// With -f m netperf's own THROUGHPUT of an RR test is the payload rate
// rounded to two decimals; the derived value must agree with it.
func TestParseRRThroughputAgreesWithNetperf(t *testing.T) {
	for _, name := range []string{"tcp_rr_1", "tcp_rr_4k"} {
		t.Run(name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			c := loadCapture(t, name)
			got, err := netperf.Parse(results.TCPRR, c.stdout)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			own, err := strconv.ParseFloat(strings.Split(strings.TrimSpace(string(c.stdout)), ",")[0], 64)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(got.ThroughputMbps).To(gomega.BeNumerically("~", own, 0.005))
		})
	}
}

// Every captured failure is an error naming its cause, never a result.
func TestParseAndDiagnoseCapturedFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		test    string
		want    error
		message string
	}{
		{"err_no_netserver", results.TCPStream, netperf.ErrNetserverUnreachable, "are you sure there is a netserver listening on 127.0.0.1 at port 22866?"},
		{"err_resolve", results.TCPStream, netperf.ErrHostUnresolvable, "could not resolve host 'no-such-host.invalid'"},
		{"err_netns_loopback_only", results.TCPStream, netperf.ErrHostUnresolvable, "could not resolve host '127.0.0.1'"},
		{"err_unknown_test", results.TCPStream, netperf.ErrUnknownTest, "(TCP_FOO) is unknown to this netperf"},
		{"err_missing_netns", results.TCPStream, netperf.ErrNetperfMissing, `exec of "no-such-netperf" failed`},
		{"err_netserver_died", results.TCPStream, netperf.ErrConnectionLost, "partial response received"},
		{"err_netserver_died_rr", results.TCPRR, netperf.ErrConnectionLost, "recv_data failed: Connection reset by peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			c := loadCapture(t, tc.name)
			g.Expect(c.rc).NotTo(gomega.Equal(0))
			_, err := netperf.Parse(tc.test, c.stdout)
			g.Expect(err).To(gomega.MatchError(netperf.ErrUnparsable))
			d := netperf.Diagnose(c.stdout, c.stderr, nil)
			g.Expect(d).To(gomega.MatchError(tc.want))
			g.Expect(d.Error()).To(gomega.ContainSubstring(tc.message))
		})
	}
}

// Runs that exit 0 but did not produce what was asked for.
func TestParseRejectsIncompleteOutput(t *testing.T) {
	for _, tc := range []struct {
		name, test, stdout, message string
	}{
		{"unknown selector (captured)", results.TCPStream, string(loadCapture(t, "err_unknown_selector").stdout), `field 2 (THROUGHPUT_UNITS)`},
		{"OUTPUT_NONE (captured)", results.TCPStream, string(loadCapture(t, "err_no_output").stdout), "no result line"},
		{"empty", results.TCPStream, "", "no result line"},
		{"stream result read as RR", results.TCPRR, string(loadCapture(t, "tcp_stream_256k_64k").stdout), "want 11 comma-separated fields"},
		{"RR result read as stream", results.TCPStream, string(loadCapture(t, "tcp_rr_1").stdout), "want 6 comma-separated fields"},
		{"zero throughput", results.TCPStream, "0.00,10^6bits/s,1.00,4194304,1,65483\n", "zero throughput"},
		{"negative throughput", results.TCPStream, "-5,10^6bits/s,1.00,4194304,1,65483\n", "out of range"},
		{"NaN", results.TCPStream, "NaN,10^6bits/s,1.00,4194304,1,65483\n", "out of range"},
		{"stream in Trans/s", results.TCPStream, "5,Trans/s,1.00,4194304,1,65483\n", "throughput in Trans/s"},
		{"zero elapsed", results.TCPStream, "5,10^6bits/s,0.00,4194304,1,65483\n", "ELAPSED_TIME"},
		{"no histogram", results.TCPRR, "0.62,10^6bits/s,1.00,1,1,1,38962.376,1,1,25.58,-1\n", "P99_LATENCY"},
		{"zero transactions", results.TCPRR, "0.00,10^6bits/s,1.00,1,1,1,0.000,1,1,25.58,1\n", "TRANSACTION_RATE"},
		{"zero sizes", results.TCPRR, "0.00,10^6bits/s,1.00,1,1,1,5.0,0,0,25.58,1\n", "request and response sizes are zero"},
		{"unknown test", "UDP_STREAM", "1,10^6bits/s,1,1,1,1\n", "only TCP_STREAM and TCP_RR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			_, err := netperf.Parse(tc.test, []byte(tc.stdout))
			g.Expect(err).To(gomega.HaveOccurred())
			g.Expect(err.Error()).To(gomega.ContainSubstring(tc.message))
		})
	}
}

func TestParseTakesSizesOfMinusOneAsUnknown(t *testing.T) {
	g := gomega.NewWithT(t)
	got, err := netperf.Parse(results.TCPStream, []byte("100.5,10^6bits/s,1.00,-1,-1,-1\n"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(netperf.Result{ThroughputMbps: 100.5, ElapsedSec: 1}))
}

func TestDiagnoseRecognisesNothingInAResult(t *testing.T) {
	g := gomega.NewWithT(t)
	c := loadCapture(t, "tcp_stream_256k_64k")
	g.Expect(netperf.Diagnose(c.stdout, c.stderr, nil)).To(gomega.Succeed())
}

func FuzzParse(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatalf("failed to list testdata: %v", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".stdout") {
			b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
			if err != nil {
				f.Fatalf("failed to read %s: %v", e.Name(), err)
			}
			f.Add(b)
		}
	}
	// Overflows once converted to 10^6 bit/s.
	f.Add([]byte("1e308,10^9bits/s,1,1,1,1"))
	f.Add([]byte("1,10^6bits/s,1,1,1,1,1e308,2147483647,2147483647,1,1"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, test := range []string{results.TCPStream, results.TCPRR} {
			r, err := netperf.Parse(test, out)
			if err != nil {
				continue
			}
			// A parsed result always measured something, in finite numbers.
			if !(r.ThroughputMbps > 0) || math.IsInf(r.ThroughputMbps, 0) || !(r.ElapsedSec > 0) {
				t.Fatalf("Parse(%s, %q) = %+v without error", test, out, r)
			}
			if results.IsRR(test) && (!(r.TransactionsPerSec > 0) || !(r.MeanLatencyUs > 0) || r.P99LatencyUs < 0) {
				t.Fatalf("Parse(%s, %q) = %+v without error", test, out, r)
			}
		}
	})
}
