package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/report"
	"github.com/fastpath-io/fastpath/e2e/localenv/guests"
)

// Paths of the guest-to-guest stream comparison in results.json.
const (
	PathVsockSibling = "vsock-sibling"
	PathVsockRelay   = "vsock-relay"
	PathFastPath     = "fastpath"
)

// Stream comparison sizes: writes of 4 KiB, 64 KiB and 1 MiB (the patched
// Sibling backend splits packets longer than a guest RX buffer, so any
// size arrives), each transfer guests.StreamBytes, streamRounds rounds with
// the paths alternating. About a minute under TCG on two cores; twice that
// under load.
var streamWrites = []int{4 << 10, 64 << 10, 1 << 20}

const (
	streamRounds = 3
	// streamStall fails a transfer whose sink has not answered by then.
	streamStall = 60 * time.Second
	// streamTCPPort is the fast-path TCP sink's port in the relay server.
	streamTCPPort = 5002
)

// streamPair is a client and a server guest of one attachment, with the
// server's vsock service.
type streamPair struct {
	client, server *guests.Guest
	svc            fastpathv1alpha1.VSOCKServiceStatus
	serverFastIP   string
}

// streamPairOf returns the pair of the first attachment in mode mode that
// has a vsock service (and, for Relay, a fast-path network): the service's
// guest serves, another guest of the attachment sends.
func (d *demo) streamPairOf(items []fastpathv1alpha1.FastPathAttachment, mode fastpathv1alpha1.VSOCKMode) (streamPair, error) {
	for _, a := range items {
		if a.Spec.VSOCK == nil || len(a.Status.VSOCKServices) == 0 {
			continue
		}
		m := a.Spec.VSOCK.Mode
		if m == "" {
			m = fastpathv1alpha1.VSOCKModeRelay
		}
		if m != mode || (mode == fastpathv1alpha1.VSOCKModeRelay && a.Spec.Network == nil) {
			continue
		}
		p := streamPair{svc: a.Status.VSOCKServices[0]}
		for _, vm := range a.Status.VMs {
			g, ok := d.stack.Emulator.Guest(types.NamespacedName{Namespace: a.Namespace, Name: vm.Name})
			if !ok || g.Real == nil {
				continue
			}
			if vm.Name == p.svc.VM {
				p.server = g.Real
				if n, ok := g.Real.NIC(vm.MAC); ok && vm.MAC != "" {
					p.serverFastIP = strings.Split(n.IP, "/")[0]
				}
			} else if p.client == nil {
				p.client = g.Real
			}
		}
		if p.client != nil && p.server != nil {
			return p, nil
		}
	}
	return streamPair{}, fmt.Errorf("failed to find two real guests of an attachment in vsock mode %s with a service", mode)
}

// guestStreams measures VSOCK_STREAM between two real guests in mode
// Sibling (queue-1 -> queue-0 at the service's CID and port) and in mode
// Relay (db-1 -> CID 2, the service's relay port, the agent's relay, db-0),
// and TCP over the fast path (db-1 -> db-0), the paths alternating, at
// every size of streamWrites; it first shows the Sibling backend's write
// limit. It prints the medians and the ratios and returns one run per path
// and size.
func (d *demo) guestStreams(ctx context.Context, items []fastpathv1alpha1.FastPathAttachment) ([]results.Run, error) {
	sib, err := d.streamPairOf(items, fastpathv1alpha1.VSOCKModeSibling)
	if err != nil {
		return nil, err
	}
	rel, err := d.streamPairOf(items, fastpathv1alpha1.VSOCKModeRelay)
	if err != nil {
		return nil, err
	}
	if sib.svc.TargetCID == nil || rel.serverFastIP == "" {
		return nil, fmt.Errorf("failed to set up the stream comparison: the Sibling service has no target CID or %s no fast-path address", rel.server.Name)
	}
	sibTarget := fmt.Sprintf("VSOCK-CONNECT:%d:%d", *sib.svc.TargetCID, sib.svc.Port)
	for _, s := range []struct {
		g            *guests.Guest
		name, listen string
	}{
		{sib.server, "sibling", fmt.Sprintf("VSOCK-LISTEN:%d", sib.svc.Port)},
		{rel.server, "relay", fmt.Sprintf("VSOCK-LISTEN:%d", rel.svc.Port)},
		{rel.server, "tcp", fmt.Sprintf("TCP-LISTEN:%d,bind=%s", streamTCPPort, rel.serverFastIP)},
	} {
		if err := s.g.ServeSink(ctx, s.name, s.listen, guests.StreamBytes); err != nil {
			return nil, err
		}
	}
	over := guests.UnpatchedSiblingWriteBytes + 1
	fmt.Fprintf(d.out, "VSOCK_STREAM and TCP over the fast path between real guests   [%s]  (+%s)\n", guests.Label, time.Since(d.started).Round(time.Second))
	fmt.Fprintf(d.out, "  write sizes %s bytes; vhost-device-vsock 0.3.0 with our patches splits a sibling's packet across the receiving guest's RX buffers\n", joinInts(streamWrites))
	fmt.Fprintf(d.out, "  (unpatched, writes over %d bytes were dropped and the stream stalled: docs/vsock-sibling.md)\n", guests.UnpatchedSiblingWriteBytes)
	sent, got, err := guests.ProbeWrites(ctx, sib.client, sibTarget, sib.server, "sibling", over, 17)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(d.out, "  checked in this run: %s sent %d bytes in %d-byte writes to %s -> %s received %d\n", sib.client.Name, sent, over, sibTarget, sib.server.Name, got)
	if got != sent {
		return nil, fmt.Errorf("the Sibling backend lost %d of %d bytes in %d-byte writes: is bin/vhost-device-vsock the patched build (make setup)?", sent-got, sent, over)
	}
	paths := []guests.StreamPath{
		{Name: PathVsockSibling, From: sib.client, Target: sibTarget},
		{Name: PathVsockRelay, From: rel.client, Target: fmt.Sprintf("VSOCK-CONNECT:%d:%d", 2, rel.svc.RelayPort)},
		{Name: PathFastPath, From: rel.client, Target: fmt.Sprintf("TCP:%s:%d", rel.serverFastIP, streamTCPPort)},
	}
	fmt.Fprintf(d.out, "  %s: %s -> %s (%s); %s: %s -> CID 2 port %d, the agent's relay, %s; %s: %s -> %s:%d over TCP\n",
		PathVsockSibling, sib.client.Name, sib.server.Name, sibTarget, PathVsockRelay, rel.client.Name, rel.svc.RelayPort, rel.server.Name,
		PathFastPath, rel.client.Name, rel.serverFastIP, streamTCPPort)
	fmt.Fprintf(d.out, "  dd | socat -b <size>, %d MiB per transfer timed inside the sender until the sink answers with the count it read; %d rounds, paths alternating:\n",
		guests.StreamBytes>>20, streamRounds)
	fmt.Fprintf(d.out, "  %-8s %16s %16s %16s  (median Mbit/s)\n", "write", PathVsockSibling, PathVsockRelay, PathFastPath)
	var runs []results.Run
	med := map[string]map[int]float64{}
	for _, size := range streamWrites {
		samples, err := guests.CompareStreams(ctx, paths, []int{size}, guests.StreamBytes, streamRounds, streamStall, nil)
		if err != nil {
			return runs, fmt.Errorf("VSOCK_STREAM comparison: %w", err)
		}
		row := fmt.Sprintf("  %-8s", results.FormatBytes(size))
		for _, p := range paths {
			r := streamRun(p, size, samples)
			runs = append(runs, r)
			if med[p.Name] == nil {
				med[p.Name] = map[int]float64{}
			}
			med[p.Name][size] = r.ThroughputMbps
			row += fmt.Sprintf(" %16.1f", r.ThroughputMbps)
		}
		fmt.Fprintf(d.out, "%s   (+%s)\n", row, time.Since(d.started).Round(time.Second))
	}
	const at = 64 << 10 // the ratios' write size, as issue 25 asks
	d.streamLines = []string{
		fmt.Sprintf("ratio vsock-sibling/vsock-relay %.2f (%d-byte writes, medians of %d)", med[PathVsockSibling][at]/med[PathVsockRelay][at], at, streamRounds),
		fmt.Sprintf("ratio vsock-sibling/fastpath %.2f (%d-byte writes, medians of %d)", med[PathVsockSibling][at]/med[PathFastPath][at], at, streamRounds),
	}
	for _, l := range d.streamLines {
		fmt.Fprintln(d.out, l)
	}
	fmt.Fprintf(d.out, "  (TCG: the guests' emulated CPUs bound every path; the Relay path here is vhost-device-vsock per guest plus the relay, standing in for kernel vhost-vsock)\n")
	return runs, nil
}

// streamRun turns the samples of path p at one write size into a results
// run: VSOCK_STREAM for the vsock paths, TCP_STREAM (default socket
// buffers) for the fast path.
func streamRun(p guests.StreamPath, size int, samples []guests.StreamSample) results.Run {
	test := results.VSockStream
	if p.Name == PathFastPath {
		test = results.TCPStream
	}
	r := results.Run{Path: p.Name, Test: test, MessageBytes: size, Sessions: 1, Pairs: 1}
	for _, s := range samples {
		if s.Path != p.Name || s.WriteBytes != size {
			continue
		}
		r.Samples = append(r.Samples, results.Sample{Repetition: s.Round, ThroughputMbps: s.Mbps, PerSession: []results.Session{{
			Pair: 1, Session: 1, Endpoint: p.Target, ThroughputMbps: s.Mbps, ElapsedSec: s.Elapsed.Seconds(),
		}}})
	}
	r.Summarize()
	return r
}

// guestReportOptions are the report's options for the real-guest results:
// the pod network and the relay are the references, and the streams get
// the VMCI-paper-style chart.
func guestReportOptions(lines []string) report.Options {
	return report.Options{
		ExtraLines:  lines,
		Title:       "Fastpath demo: real guests (" + guests.Label + ")",
		IsReference: func(p string) bool { return p == PathGuestPodNetwork || p == PathVsockRelay },
		PathCharts: []report.PathChart{{
			Name:     "guest-streams",
			Title:    "Guest to guest: throughput vs message size (vsock Sibling, vsock Relay, TCP over the fast path)",
			Subtitle: fmt.Sprintf("REAL VMs under QEMU TCG; dd | socat, %d MiB per transfer, medians of %d with min to max; writes of 4 KiB to 1 MiB", guests.StreamBytes>>20, streamRounds),
			Paths:    []string{PathVsockSibling, PathVsockRelay, PathFastPath},
		}},
	}
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	if len(s) > 1 {
		return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
	}
	return strings.Join(s, "")
}

// writeGuestReport renders doc (the real-guest results) as report.md,
// report.html and the charts' SVG files into dir, with lines (the stream
// ratios) among the headline lines, and returns the files.
func writeGuestReport(doc results.Document, dir string, lines []string) ([]string, error) {
	r, err := report.Render(doc, guestReportOptions(lines))
	if err != nil {
		return nil, err
	}
	return r.WriteDir(dir)
}
