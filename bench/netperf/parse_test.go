package netperf_test

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/netperf"
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

// The values are those in the captured stdout files (Debian netperf 2.7.0,
// client and netserver in two network namespaces joined by a veth, on a busy
// 2-CPU machine, hence the 100% host-wide CPU); regenerating the captures
// means updating this table.
func TestParseCapturedResults(t *testing.T) {
	// cpu is the CPU part of a result: utilisation and service demand of
	// both ends, method "S" (/proc/stat).
	cpu := func(r netperf.Result, lu, ru, lsd, rsd float64) netperf.Result {
		r.LocalCPUUtilPercent, r.RemoteCPUUtilPercent = lu, ru
		r.LocalServiceDemandUsPerKB, r.RemoteServiceDemandUsPerKB = lsd, rsd
		r.CPUMethod = "S"
		return r
	}
	for _, tc := range []struct {
		name string
		test string
		want netperf.Result
	}{
		{"tcp_stream_256k_64k", results.TCPStream, cpu(netperf.Result{ThroughputMbps: 4550.50, ElapsedSec: 1.04, LocalSocketBytes: 524288, RemoteSocketBytes: 524288, MSSBytes: 1448}, 100, 100, 3.600, 3.600)},
		{"tcp_stream_64k_512", results.TCPStream, cpu(netperf.Result{ThroughputMbps: 211.89, ElapsedSec: 1.02, LocalSocketBytes: 131072, RemoteSocketBytes: 131072, MSSBytes: 1448}, 100, 100, 77.324, 77.324)},
		{"tcp_stream_default_sock", results.TCPStream, cpu(netperf.Result{ThroughputMbps: 2736.67, ElapsedSec: 1, LocalSocketBytes: 4194304, RemoteSocketBytes: 33554432, MSSBytes: 1448}, 100, 100, 5.987, 5.987)},
		// The receive direction: the server sends.
		{"tcp_maerts_256k_64k", results.TCPMaerts, cpu(netperf.Result{ThroughputMbps: 2857.10, ElapsedSec: 1.02, LocalSocketBytes: 524288, RemoteSocketBytes: 524288, MSSBytes: 1448}, 100, 100, 5.734, 5.734)},
		// UDP: THROUGHPUT is what arrived; datagrams sent and received give the loss.
		{"udp_stream_1472", results.UDPStream, cpu(netperf.Result{ThroughputMbps: 741.79, ElapsedSec: 1.01, LocalSocketBytes: 524288, RemoteSocketBytes: 524288, MessagesSent: 132420, MessagesReceived: 63336}, 100, 100, 10.564, 10.564)},
		// -P 1: banner and header lines before the values.
		{"tcp_stream_banner", results.TCPStream, cpu(netperf.Result{ThroughputMbps: 1826.04, ElapsedSec: 1.08, LocalSocketBytes: 4194304, RemoteSocketBytes: 33554432, MSSBytes: 1448}, 100, 100, 8.972, 8.972)},
		// -f g and -f M: converted to 10^6 bit/s.
		{"tcp_stream_gbits", results.TCPStream, cpu(netperf.Result{ThroughputMbps: 1780, ElapsedSec: 1, LocalSocketBytes: 4194304, RemoteSocketBytes: 33554432, MSSBytes: 1448}, 100, 100, 9.189, 9.189)},
		{"tcp_stream_mbytes", results.TCPStream, cpu(netperf.Result{ThroughputMbps: 125.38 * 8 * 1.048576, ElapsedSec: 1.01, LocalSocketBytes: 4194304, RemoteSocketBytes: 33554432, MSSBytes: 1448}, 100, 100, 15.577, 15.577)},
		// RR throughput is derived from the transaction rate.
		{"tcp_rr_1", results.TCPRR, cpu(netperf.Result{ThroughputMbps: 33652.246 * 2 * 8 / 1e6, ElapsedSec: 1.01, LocalSocketBytes: 524288, RemoteSocketBytes: 524288, MSSBytes: 1448,
			TransactionsPerSec: 33652.246, RequestBytes: 1, ResponseBytes: 1, MeanLatencyUs: 29.66, P99LatencyUs: 63}, 100, 100, 30428.875, 30428.875)},
		{"tcp_rr_4k", results.TCPRR, cpu(netperf.Result{ThroughputMbps: 67311.071 * 8192 * 8 / 1e6, ElapsedSec: 1.01, LocalSocketBytes: 131072, RemoteSocketBytes: 131072, MSSBytes: 1448,
			TransactionsPerSec: 67311.071, RequestBytes: 4096, ResponseBytes: 4096, MeanLatencyUs: 14.80, P99LatencyUs: 44}, 99.5, 99.5, 3.696, 3.696)},
		// A connection per transaction. netserver's REMOTE_CPU_UTIL of a
		// TCP_CRR exceeds 100% (its interval is not the test's), one more
		// reason to report the host-wide figure once, from the client.
		{"tcp_crr_1", results.TCPCRR, cpu(netperf.Result{ThroughputMbps: 14674.753 * 2 * 8 / 1e6, ElapsedSec: 1, LocalSocketBytes: 16384, RemoteSocketBytes: 131072, MSSBytes: 1448,
			TransactionsPerSec: 14674.753, RequestBytes: 1, ResponseBytes: 1, MeanLatencyUs: 68.07, P99LatencyUs: 268}, 100, 492.28, 69779.711, 343513.156)},
		// Without -f, RR THROUGHPUT is in Trans/s and service demand in
		// usec/Tran, converted to usec per KiB of both directions.
		{"tcp_rr_transs", results.TCPRR, cpu(netperf.Result{ThroughputMbps: 30020.073 * 2 * 8 / 1e6, ElapsedSec: 1, LocalSocketBytes: 1942272, RemoteSocketBytes: 131072, MSSBytes: 1448,
			TransactionsPerSec: 30020.073, RequestBytes: 1, ResponseBytes: 1, MeanLatencyUs: 33.14, P99LatencyUs: 188}, 100, 100, 66.622*512, 66.622*512)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			c := loadCapture(t, tc.name)
			g.Expect(c.rc).To(gomega.Equal(0))
			got, err := netperf.Parse(tc.test, c.stdout)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(got.ThroughputMbps).To(gomega.BeNumerically("~", tc.want.ThroughputMbps, 1e-6))
			got.ThroughputMbps = tc.want.ThroughputMbps
			g.Expect(got.LocalServiceDemandUsPerKB).To(gomega.BeNumerically("~", tc.want.LocalServiceDemandUsPerKB, 1e-6))
			g.Expect(got.RemoteServiceDemandUsPerKB).To(gomega.BeNumerically("~", tc.want.RemoteServiceDemandUsPerKB, 1e-6))
			got.LocalServiceDemandUsPerKB, got.RemoteServiceDemandUsPerKB = tc.want.LocalServiceDemandUsPerKB, tc.want.RemoteServiceDemandUsPerKB
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
		{"err_no_netserver", results.TCPStream, netperf.ErrNetserverUnreachable, "are you sure there is a netserver listening on 10.199.0.2 at port 22866?"},
		{"err_resolve", results.TCPStream, netperf.ErrHostUnresolvable, "could not resolve host 'no-such-host.invalid'"},
		{"err_netns_loopback_only", results.TCPStream, netperf.ErrHostUnresolvable, "could not resolve host '127.0.0.1'"},
		{"err_unknown_test", results.TCPStream, netperf.ErrUnknownTest, "(TCP_FOO) is unknown to this netperf"},
		{"err_missing_netns", results.TCPStream, netperf.ErrNetperfMissing, `exec of "no-such-netperf" failed`},
		{"err_netserver_died", results.TCPStream, netperf.ErrConnectionLost, "send_data failed: Connection reset by peer"},
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
		{"stream result read as RR", results.TCPRR, string(loadCapture(t, "tcp_stream_256k_64k").stdout), "want 17 comma-separated fields"},
		{"RR result read as stream", results.TCPStream, string(loadCapture(t, "tcp_rr_1").stdout), "want 12 comma-separated fields"},
		{"zero throughput", results.TCPStream, "0.00,10^6bits/s,1.00,4194304,1,65483,100.00,100.00,3.600,3.600,usec/KB,S\n", "zero throughput"},
		{"negative throughput", results.TCPStream, "-5,10^6bits/s,1.00,4194304,1,65483,100.00,100.00,3.600,3.600,usec/KB,S\n", "out of range"},
		{"NaN", results.TCPStream, "NaN,10^6bits/s,1.00,4194304,1,65483,100.00,100.00,3.600,3.600,usec/KB,S\n", "out of range"},
		{"stream in Trans/s", results.TCPStream, "5,Trans/s,1.00,4194304,1,65483,100.00,100.00,3.600,3.600,usec/KB,S\n", "throughput in Trans/s"},
		{"zero elapsed", results.TCPStream, "5,10^6bits/s,0.00,4194304,1,65483,100.00,100.00,3.600,3.600,usec/KB,S\n", "ELAPSED_TIME"},
		{"no histogram", results.TCPRR, "0.62,10^6bits/s,1.00,1,1,1,100.00,100.00,3.600,3.600,usec/KB,S,38962.376,1,1,25.58,-1\n", "P99_LATENCY"},
		{"zero transactions", results.TCPRR, "0.00,10^6bits/s,1.00,1,1,1,100.00,100.00,3.600,3.600,usec/KB,S,0.000,1,1,25.58,1\n", "TRANSACTION_RATE"},
		{"zero sizes", results.TCPRR, "0.00,10^6bits/s,1.00,1,1,1,100.00,100.00,3.600,3.600,usec/KB,S,5.0,0,0,25.58,1\n", "request and response sizes are zero"},
		{"unknown test", "SCTP_STREAM", "1,10^6bits/s,1,1,1,1\n", "supported are TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_RR, TCP_CRR"},
		{"CPU not measured", results.TCPStream, "5,10^6bits/s,1.00,4194304,1,65483,-1.00,-1.00,-1.000,-1.000,usec/KB,S\n", "CPU not measured"},
		{"unknown SD units", results.TCPStream, "5,10^6bits/s,1.00,4194304,1,65483,100.00,100.00,3.600,3.600,msec/MB,S\n", "unknown service demand units"},
		{"stream SD per transaction", results.TCPStream, "5,10^6bits/s,1.00,4194304,1,65483,100.00,100.00,3.600,3.600,usec/Tran,S\n", "service demand in usec/Tran"},
		{"UDP sent nothing", results.UDPStream, "5,10^6bits/s,1.00,4194304,1,-1,100.00,100.00,3.600,3.600,usec/KB,S,0,0\n", "sent no datagrams"},
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
	got, err := netperf.Parse(results.TCPStream, []byte("100.5,10^6bits/s,1.00,-1,-1,-1,50.00,50.00,1.000,1.000,usec/KB,S\n"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(netperf.Result{ThroughputMbps: 100.5, ElapsedSec: 1, LocalCPUUtilPercent: 50, RemoteCPUUtilPercent: 50, LocalServiceDemandUsPerKB: 1, RemoteServiceDemandUsPerKB: 1, CPUMethod: "S"}))
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
	f.Add([]byte("1e308,10^9bits/s,1,1,1,1,1,1,1,1,usec/KB,S"))
	f.Add([]byte("1,10^6bits/s,1,1,1,1,1,1,1,1,usec/KB,S,1e308,2147483647,2147483647,1,1"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, test := range netperf.Tests {
			r, err := netperf.Parse(test, out)
			if err != nil {
				continue
			}
			// A parsed result always measured something, in finite numbers.
			if !(r.ThroughputMbps > 0) || math.IsInf(r.ThroughputMbps, 0) || !(r.ElapsedSec > 0) || r.LocalCPUUtilPercent < 0 || r.LocalServiceDemandUsPerKB < 0 {
				t.Fatalf("Parse(%s, %q) = %+v without error", test, out, r)
			}
			if results.IsRR(test) && (!(r.TransactionsPerSec > 0) || !(r.MeanLatencyUs > 0) || r.P99LatencyUs < 0) {
				t.Fatalf("Parse(%s, %q) = %+v without error", test, out, r)
			}
		}
	})
}
