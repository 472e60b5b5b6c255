package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/e2e/localenv/emulation"
	"github.com/fastpath-io/fastpath/e2e/localenv/guests"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// RealOutsiderCID is the vsock CID of the real guest the demo boots outside
// every attachment, to show the relay refusing it.
const RealOutsiderCID = 99

// Real-guest netperf paths in results.json.
const (
	PathGuestFastPath   = "guest-fastpath"
	PathGuestPodNetwork = "guest-pod-network"
)

// guestRunSeconds and guestRepetitions size the guest-to-guest netperf:
// under TCG a run is CPU-bound emulation, so short runs, alternated.
const (
	guestRunSeconds  = 4
	guestRepetitions = 2
)

// realGuestProof proves the tuning from inside the real guests of every
// attachment: the guests' own report per fast-path NIC, a path-MTU ping,
// netperf TCP_STREAM and TCP_RR over the fast path and the pod network
// (alternating, medians), and vsock through the agent's relay from an
// attached VM (answered) and from a real guest outside it (refused). It
// writes _out/demo/results.json and fails when a figure differs from the
// attachment's spec or a check did not hold.
func (d *demo) realGuestProof(ctx context.Context) error {
	d.header("Real guests: proof from inside the VMs (" + guests.Label + ")")
	list := &fastpathv1alpha1.FastPathAttachmentList{}
	if err := d.stack.Client.List(ctx, list, clientInNamespace(Namespace)); err != nil {
		return fmt.Errorf("failed to list FastPathAttachments: %w", err)
	}
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	doc := results.Document{Machine: results.Machine{
		Hostname: host, Kernel: strings.TrimSpace(string(kernel)), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		Timestamp: time.Now().UTC(), Guests: "qemu-tcg",
		Emulated: "KubeVirt's controllers, Multus and the kubelet are emulated; the guests are real QEMU VMs under TCG (no KVM), so absolute throughput is CPU-bound emulation: compare paths by their ratio",
	}}
	var failures []string
	for _, a := range list.Items {
		if a.Spec.Network == nil {
			continue
		}
		want := a.Spec.Network
		var wired []*guests.Guest
		var fastIPs []string
		var podIPs []string
		for _, vm := range a.Status.VMs {
			g, ok := d.stack.Emulator.Guest(types.NamespacedName{Namespace: a.Namespace, Name: vm.Name})
			if !ok || g.Real == nil {
				return fmt.Errorf("failed to find the real guest of VM %s", vm.Name)
			}
			nic, ok := g.Real.NIC(vm.MAC)
			if !ok {
				return fmt.Errorf("the real guest %s has no NIC with the fast-path MAC %s (it reported %d NICs)", vm.Name, vm.MAC, len(g.Real.NICs))
			}
			fmt.Fprintf(d.out, "%s   [%s, read inside the guest; booted in %s]\n", nic.Line(vm.Name), guests.Label, g.Real.BootTime.Round(100*time.Millisecond))
			doc.GuestChecks = append(doc.GuestChecks, results.GuestCheck{VM: vm.Name, Interface: nic.Name, MTU: nic.MTU,
				RxQueueSize: nic.RX, TxQueueSize: nic.TX, Queues: nic.Queues, TSO: nic.TSO})
			for field, pair := range map[string][2]int{"mtu": {nic.MTU, int(deref(want.MTU))}, "rxQueueSize": {nic.RX, int(deref(want.RxQueueSize))},
				"txQueueSize": {nic.TX, int(deref(want.TxQueueSize))}, "queues": {nic.Queues, int(deref(want.Queues))}} {
				if pair[1] != 0 && pair[0] != pair[1] {
					failures = append(failures, fmt.Sprintf("guest %s %s: %s %d, the attachment asks %d", vm.Name, nic.Name, field, pair[0], pair[1]))
				}
			}
			wired = append(wired, g.Real)
			fastIPs = append(fastIPs, strings.Split(nic.IP, "/")[0])
			podIPs = append(podIPs, g.PodIP.String())
		}
		if len(wired) < 2 {
			continue
		}
		client, server := wired[0], wired[1]
		mtu := client.NICs[0].MTU
		if n, ok := client.NIC(a.Status.VMs[0].MAC); ok {
			mtu = n.MTU
		}
		out, rc, err := client.Run(ctx, fmt.Sprintf("/usr/bin/ping -M do -s %d -c 3 -W 5 %s", mtu-28, fastIPs[1]))
		if err != nil || rc != 0 {
			failures = append(failures, fmt.Sprintf("path MTU %d from %s to %s: ping -M do failed (%v): %s", mtu, client.Name, server.Name, err, out))
		} else {
			fmt.Fprintf(d.out, "path MTU: %s -> %s, ping -M do -s %d (a %d-byte packet, DF set) over the fast path: %s\n", client.Name, server.Name, mtu-28, mtu, lastLine(out, "packets transmitted"))
		}
		runs, err := d.guestNetperf(ctx, client, server, fastIPs[1], podIPs[1])
		if err != nil {
			failures = append(failures, err.Error())
		}
		doc.Runs = append(doc.Runs, runs...)
	}
	checks, err := d.realVsockChecks(ctx, list.Items)
	if err != nil {
		failures = append(failures, err.Error())
	}
	doc.VsockChecks = checks
	if err == nil {
		runs, err := d.guestStreams(ctx, list.Items)
		if err != nil {
			failures = append(failures, err.Error())
		}
		doc.Runs = append(doc.Runs, runs...)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	path := filepath.Join(d.outDir, "results.json")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	written := []string{d.rel(path)}
	if len(doc.Runs) > 0 {
		files, err := writeGuestReport(doc, d.outDir, d.streamLines)
		if err != nil {
			failures = append(failures, err.Error())
		}
		for _, f := range files {
			if !strings.HasSuffix(f, ".svg") {
				written = append(written, d.rel(f))
			}
		}
	}
	fmt.Fprintf(d.out, "wrote %s (guestChecks, vsockChecks, machine.guests %s, runs; report.html with throughput vs message size per path)\n", strings.Join(written, ", "), doc.Machine.Guests)
	if len(failures) > 0 {
		return fmt.Errorf("real-guest checks failed:\n  %s", strings.Join(failures, "\n  "))
	}
	return nil
}

// guestNetperf runs netperf in the client guest against the server guest's
// netserver: TCP_STREAM and TCP_RR, fast path and pod network alternating,
// guestRepetitions each, and prints the medians and the ratios.
func (d *demo) guestNetperf(ctx context.Context, client, server *guests.Guest, fastIP, podIP string) ([]results.Run, error) {
	type path struct{ name, ip string }
	paths := []path{{PathGuestFastPath, fastIP}, {PathGuestPodNetwork, podIP}}
	var out []results.Run
	median := map[string]float64{}
	for _, test := range []string{results.TCPStream, results.TCPRR} {
		samples, latency := map[string][]float64{}, map[string][]float64{}
		for rep := 0; rep < guestRepetitions; rep++ {
			for _, p := range paths {
				cmd := fmt.Sprintf("/usr/bin/netperf -H %s -t %s -l %d -P 0 -- -o THROUGHPUT,MEAN_LATENCY", p.ip, test, guestRunSeconds)
				if test == results.TCPStream {
					cmd += " -m 65536 -s 262144 -S 262144"
				}
				o, rc, err := client.Run(ctx, cmd)
				f := strings.Split(strings.TrimSpace(lastLine(o, "")), ",")
				v, perr := strconv.ParseFloat(f[0], 64)
				if err != nil || rc != 0 || perr != nil {
					return out, fmt.Errorf("netperf %s from %s to %s over %s failed (rc %d, %v): %s", test, client.Name, server.Name, p.name, rc, err, o)
				}
				samples[p.name] = append(samples[p.name], v)
				if len(f) > 1 {
					lat, _ := strconv.ParseFloat(f[1], 64)
					latency[p.name] = append(latency[p.name], lat)
				}
			}
		}
		for _, p := range paths {
			s := slices.Clone(samples[p.name])
			slices.Sort(s)
			m := s[len(s)/2]
			if len(s)%2 == 0 {
				m = (s[len(s)/2-1] + s[len(s)/2]) / 2
			}
			median[test+p.name] = m
			r := results.Run{Path: p.name, Test: test, Sessions: 1, Pairs: 1}
			for i, v := range samples[p.name] {
				smp := results.Sample{Repetition: i + 1, PerSession: []results.Session{}}
				if test == results.TCPStream {
					smp.ThroughputMbps = v
				} else {
					// One byte each way per transaction (results.Session).
					smp.TransactionsPerSec, smp.ThroughputMbps = v, v*2*8/1e6
					if i < len(latency[p.name]) {
						smp.MeanLatencyUs = latency[p.name][i]
					}
				}
				r.Samples = append(r.Samples, smp)
			}
			if test == results.TCPStream {
				r.SocketBytes, r.MessageBytes = 262144, 65536
			} else {
				r.MessageBytes = 1
			}
			r.Summarize()
			out = append(out, r)
		}
	}
	fmt.Fprintf(d.out, "netperf %s -> %s inside the guests (%d s runs, paths alternating, median of %d; TCG: absolute figures are CPU-bound emulation):\n",
		client.Name, server.Name, guestRunSeconds, guestRepetitions)
	fmt.Fprintf(d.out, "  TCP_STREAM  fast path %8.1f Mbit/s   pod network %8.1f Mbit/s   ratio fastpath/pod-network %.2f\n",
		median[results.TCPStream+PathGuestFastPath], median[results.TCPStream+PathGuestPodNetwork],
		median[results.TCPStream+PathGuestFastPath]/median[results.TCPStream+PathGuestPodNetwork])
	fmt.Fprintf(d.out, "  TCP_RR      fast path %8.1f trans/s  pod network %8.1f trans/s  ratio fastpath/pod-network %.2f\n",
		median[results.TCPRR+PathGuestFastPath], median[results.TCPRR+PathGuestPodNetwork],
		median[results.TCPRR+PathGuestFastPath]/median[results.TCPRR+PathGuestPodNetwork])
	return out, nil
}

// realVsockChecks serves every vsock service with socat in its real target
// guest and dials it from another guest of the attachment (must be
// answered) and from a real guest outside every attachment (must be
// refused): through the agent's relay at CID 2 in mode Relay, at the
// target's CID directly in mode Sibling, where the group is the allow-list.
// The services' answering socat processes are stopped at the end.
func (d *demo) realVsockChecks(ctx context.Context, items []fastpathv1alpha1.FastPathAttachment) ([]results.VsockCheck, error) {
	var checks []results.VsockCheck
	var outsider *guests.Guest
	var outsiderNS *topology.NetNS
	type served struct {
		g   *guests.Guest
		pid string
	}
	var answerers []served
	defer func() {
		for _, a := range answerers {
			_, _, _ = a.g.Run(ctx, "kill "+a.pid)
		}
		if outsider != nil {
			if err := outsider.Stop(); err != nil {
				fmt.Fprintf(d.out, "failed to stop the outsider guest: %v\n", err)
			}
		}
		if outsiderNS != nil {
			_ = outsiderNS.Delete()
		}
	}()
	for _, a := range items {
		cids := map[string]int64{}
		for _, vm := range a.Status.VMs {
			if vm.CID != nil {
				cids[vm.Name] = *vm.CID
			}
		}
		for _, svc := range a.Status.VSOCKServices {
			target, ok := d.stack.Emulator.Guest(types.NamespacedName{Namespace: a.Namespace, Name: svc.VM})
			if !ok || target.Real == nil {
				return checks, fmt.Errorf("failed to find the real guest of %s", svc.VM)
			}
			var from *emulation.Guest
			for _, vm := range a.Status.VMs {
				if vm.Name != svc.VM {
					if g, ok := d.stack.Emulator.Guest(types.NamespacedName{Namespace: a.Namespace, Name: vm.Name}); ok && g.Real != nil {
						from = &g
						break
					}
				}
			}
			if from == nil {
				return checks, fmt.Errorf("failed to show vsock service %s: no other real guest in attachment %s", svc.Name, a.Name)
			}
			mode := string(svc.Mode)
			if mode == "" {
				mode = string(fastpathv1alpha1.VSOCKModeRelay)
			}
			sibling := mode == string(fastpathv1alpha1.VSOCKModeSibling)
			serve := fmt.Sprintf("/usr/bin/socat VSOCK-LISTEN:%d,fork,reuseaddr SYSTEM:'read l; echo %s answers $l' >/dev/null 2>&1 & echo $!", svc.Port, svc.VM)
			out, rc, err := target.Real.Run(ctx, serve)
			if err != nil || rc != 0 {
				return checks, fmt.Errorf("failed to start socat in %s: rc %d: %v", svc.VM, rc, err)
			}
			answerers = append(answerers, served{target.Real, strings.TrimSpace(out)})
			dialCID, dialPort := uint32(vsock.HostCID), uint32(svc.RelayPort)
			targetCID, fromCID := int64(target.CID), int64(from.CID)
			via := "through the agent's relay"
			if sibling {
				if svc.TargetCID == nil {
					return checks, fmt.Errorf("vsock service %s of %s (mode Sibling) has no target CID in the attachment status", svc.Name, a.Name)
				}
				dialCID, dialPort = uint32(*svc.TargetCID), uint32(svc.Port)
				targetCID, fromCID = *svc.TargetCID, cids[from.VMI.Name]
				via = fmt.Sprintf("directly (vsock mode Sibling, address %s from the attachment status; vhost-device-vsock group %s.%s, no relay)", svc.Address, a.Namespace, a.Name)
			}
			fmt.Fprintf(d.out, "guest %s (CID %d): socat VSOCK-LISTEN:%d (service %q, mode %s)   [%s]\n", svc.VM, targetCID, svc.Port, svc.Name, mode, guests.Label)
			dial := fmt.Sprintf("echo 'SELECT 1' | /usr/bin/socat -t 5 - VSOCK-CONNECT:%d:%d", dialCID, dialPort)
			var reply string
			deadline := time.Now().Add(20 * time.Second)
			for {
				reply, _, _ = from.Real.Run(ctx, dial)
				if strings.Contains(reply, "answers") || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			ok = strings.Contains(reply, svc.VM+" answers SELECT 1")
			fmt.Fprintf(d.out, "guest %s (CID %d) dials CID %d port %d %s -> %q\n", from.VMI.Name, fromCID, dialCID, dialPort, via, strings.TrimSpace(reply))
			checks = append(checks, results.VsockCheck{Mode: mode, From: from.VMI.Name, To: svc.VM, CID: dialCID, Port: dialPort, Allowed: true, OK: ok})
			if !ok {
				if sibling {
					return checks, fmt.Errorf("vsock service %s: %s got no answer at %d:%d (see %s)", svc.Name, from.VMI.Name, dialCID, dialPort, d.rel(d.stack.AgentLog))
				}
				return checks, fmt.Errorf("vsock service %s: %s got no answer through the relay (see %s)", svc.Name, from.VMI.Name, d.rel(d.stack.AgentLog))
			}
			if outsider == nil {
				var err error
				if outsider, outsiderNS, err = d.bootOutsider(ctx); err != nil {
					return checks, err
				}
			}
			reply, _, _ = outsider.Run(ctx, dial)
			refused := !strings.Contains(reply, "answers")
			why := "refused by the relay"
			if sibling {
				why = fmt.Sprintf("refused: CID %d exists only inside the group's vhost-device-vsock, and the outsider's vsock device is not in it (%s)", dialCID, lastLine(reply, ""))
			}
			fmt.Fprintf(d.out, "guest %s (CID %d, in no attachment) dials CID %d port %d -> %s\n", outsider.Name, RealOutsiderCID, dialCID, dialPort,
				map[bool]string{true: why, false: fmt.Sprintf("ANSWERED %q", reply)}[refused])
			if !sibling {
				if line := lastLineContaining(d.stack.AgentLog, strconv.Itoa(RealOutsiderCID)); line != "" {
					fmt.Fprintf(d.out, "  agent log: %s\n", line)
				}
			}
			checks = append(checks, results.VsockCheck{Mode: mode, From: outsider.Name, To: svc.VM, CID: dialCID, Port: dialPort, Allowed: false, OK: refused})
			if !refused {
				return checks, fmt.Errorf("vsock service %s (mode %s): %s (CID %d) got in", svc.Name, mode, outsider.Name, RealOutsiderCID)
			}
		}
	}
	return checks, nil
}

// bootOutsider boots a real guest with vsock only, in no attachment, in a
// network namespace of its own.
func (d *demo) bootOutsider(ctx context.Context) (*guests.Guest, *topology.NetNS, error) {
	name := "outsider"
	nsName := "fpdemo-" + Namespace + "." + name
	_ = topology.DeleteNetNS(nsName)
	ns, err := topology.NewNetNS(nsName)
	if err != nil {
		return nil, nil, err
	}
	vmi := fmt.Sprintf(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":%q,"namespace":%q}}`, name, Namespace)
	g, err := guests.Boot(ctx, guests.BootOptions{
		Namespace: Namespace, Name: name, UID: "0badc0de-0000-4000-8000-000000000099", VMIJSON: []byte(vmi), Launcher: ns,
		MemoryMiB: 256, VCPUs: 1, VSOCKCID: RealOutsiderCID, VSOCKDir: d.stack.VSOCKRoot,
		Dir: filepath.Join(d.stack.opts.shortDir(), "outsider"), Bin: d.bin,
	})
	if err != nil {
		_ = ns.Delete()
		return nil, nil, err
	}
	fmt.Fprintf(d.out, "booted %s, a real guest with vsock CID %d in no attachment, in %s   [%s]\n", name, RealOutsiderCID, g.BootTime.Round(100*time.Millisecond), guests.Label)
	return g, ns, nil
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// lastLine returns the last non-empty line of s containing sub ("" for any).
func lastLine(s, sub string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) && strings.TrimSpace(lines[i]) != "" {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

// GuestRequirements are what real guests need in the bin directory, with
// what provides each.
var GuestRequirements = []struct{ Name, From string }{
	{"fastpath-domain-hook", "make build"}, {"vhost-device-vsock", "make setup"},
	{"guest/vmlinuz", "make setup"}, {"guest/initramfs.gz", "make setup"},
}

// CheckGuestRequirements reports what real guests (--guests=qemu) miss:
// files in binDir and the libvirt and QEMU programs.
func CheckGuestRequirements(binDir string) error {
	var missing []string
	for _, r := range GuestRequirements {
		if _, err := os.Stat(filepath.Join(binDir, r.Name)); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%s)", filepath.Join(binDir, r.Name), r.From))
		}
	}
	for _, t := range []string{"libvirtd", "virtlogd", "virsh", "virt-xml-validate", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, fmt.Sprintf("%s (make setup)", t))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("failed to find what real guests need: %s", strings.Join(missing, ", "))
	}
	return nil
}

// applySamplesForRealGuests applies the sample files but the
// FastPathBenchmark: its VM mode reaches the guests over SSH, and the
// real-guest image has no sshd; the real-guest proof runs netperf inside the
// guests instead.
func (d *demo) applySamplesForRealGuests(ctx context.Context, files []string) error {
	for _, f := range files {
		if strings.Contains(filepath.Base(f), "fastpathbenchmark") {
			fmt.Fprintf(d.out, "(not applying %s with real guests: FastPathBenchmark's VM mode needs SSH into the guests, which the real-guest image does not run; netperf runs inside the guests in step 5)\n", d.rel(f))
			continue
		}
		if _, err := d.kubectl(ctx, nil, "-n", Namespace, "apply", "-f", d.rel(f)); err != nil {
			return err
		}
	}
	return nil
}
