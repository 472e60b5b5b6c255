package results

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Host CPU from the node's view (issue 41, docs/design.md §5.3, "The host's
// view"): in VM mode the runner asks the node agent of the VMs' node for the
// cgroup v2 CPU time of the virt-launcher pods (QEMU with its vCPU, I/O and,
// since Linux 6.4, vhost worker threads) and the node's /proc/stat "cpu"
// line, before and after each repetition, and records both readings in the
// sample (Sample.HostCPU). The figures are derived from those readings alone
// (HostCPUWindow.Figures), so whoever holds results.json can recompute them.

// GuestsTCG is Machine.Guests when the guests' CPUs were emulated by QEMU
// TCG (no KVM); GuestsKVM when they ran on KVM.
const (
	GuestsTCG = "qemu-tcg"
	GuestsKVM = "qemu-kvm"
)

// HostCPUReading is one answer of the node agent's host CPU endpoint
// (internal/node/hostcpu): what the node's kernel counted up to Time.
type HostCPUReading struct {
	// Time is the agent's clock when it read the counters (RFC 3339 in JSON).
	Time time.Time `json:"time"`
	// Node is the agent's node name.
	Node string `json:"node"`
	// UserHZ is the unit of ProcStatCPU's fields, ticks per second
	// (sysconf(_SC_CLK_TCK): 100 on every Linux architecture).
	UserHZ int `json:"userHZ"`
	// ProcStatCPU is the aggregate "cpu" line of the node's /proc/stat as
	// read: "cpu" then user, nice, system, idle, iowait, irq, softirq,
	// steal, guest, guest_nice in USER_HZ ticks summed over all CPUs
	// (proc(5)).
	ProcStatCPU string `json:"procStatCPU"`
	// KVM says whether the node has /dev/kvm; false means its guests'
	// CPUs are emulated (QEMU TCG).
	KVM bool `json:"kvm"`
	// Pods are the pods asked for, in the order asked.
	Pods []PodCPU `json:"pods"`
}

// PodCPU is one pod's cgroup CPU time.
type PodCPU struct {
	// UID is the pod's metadata.uid.
	UID string `json:"uid"`
	// Cgroup is the pod's cgroup, relative to the node's /sys/fs/cgroup,
	// e.g. "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice"
	// (cgroup v2) or "cpuacct/kubepods/burstable/pod<uid>" (cgroup v1).
	Cgroup string `json:"cgroup"`
	// File is the counter UsageUsec was read from: "cpu.stat" (cgroup v2,
	// its usage_usec) or "cpuacct.usage" (cgroup v1, nanoseconds / 1000).
	File string `json:"file,omitempty"`
	// UsageUsec is the CPU time of every thread in the cgroup and its
	// descendants, in microseconds.
	UsageUsec uint64 `json:"usageUsec"`
}

// HostCPUWindow is what a repetition recorded of the host: the readings
// taken just before its sessions started and just after they all ended,
// and the payload they moved.
type HostCPUWindow struct {
	Before HostCPUReading `json:"before"`
	After  HostCPUReading `json:"after"`
	// PayloadBytes is the payload all sessions moved: the sum over sessions
	// of throughput × elapsed time (PayloadKiB × 1024), both directions
	// for RR tests.
	PayloadBytes float64 `json:"payloadBytes"`
}

// HostCPUFigures are derived from one HostCPUWindow (HostCPUWindow.Figures).
type HostCPUFigures struct {
	// LauncherCPUSeconds is the sum over the pods of their usage_usec
	// difference, in seconds: the VMs' whole cost (vCPUs, vhost workers,
	// QEMU's I/O threads, the launcher's other processes).
	LauncherCPUSeconds float64
	// SoftirqCPUSeconds is the difference of the node's softirq field in
	// seconds: every CPU's time in softirq context, the NET_RX/NET_TX work
	// of the bridge, the veths and the taps the kernel does outside a
	// task's system call, for all of the node's traffic, and ksoftirqd's.
	SoftirqCPUSeconds float64
	// HostCPUSeconds is LauncherCPUSeconds + SoftirqCPUSeconds.
	HostCPUSeconds float64
	// HostCPUSecondsPerGB is HostCPUSeconds per 10^9 bytes of payload.
	HostCPUSecondsPerGB float64
	// GbpsPerHostCore is 10^9 bits of payload per second of host CPU: the
	// Gbit/s one host core would carry at this cost (8 /
	// HostCPUSecondsPerGB).
	GbpsPerHostCore float64
}

// Figures derives the host CPU figures of a window:
//
//	hostCPUSeconds      = Σ_pods (after.usageUsec - before.usageUsec) / 1e6
//	                      + (after.softirq - before.softirq) / userHZ
//	hostCPUSecondsPerGB = hostCPUSeconds / (payloadBytes / 1e9)
//	gbpsPerHostCore     = (payloadBytes × 8 / 1e9) / hostCPUSeconds
//
// The launchers' time and the softirq time do not overlap on a kernel with
// CONFIG_IRQ_TIME_ACCOUNTING (the scheduler's task runtime, which
// usage_usec sums, leaves interrupt time out; docs/design.md §5.3). The
// node's user and system time are left out: they hold the launchers' time
// again, and everything else the node runs.
//
// It fails when a reading lacks a pod the other has, a counter went
// backwards (a pod restarted), the nodes or USER_HZ differ, or nothing was
// moved or spent.
func (w HostCPUWindow) Figures() (HostCPUFigures, error) {
	var f HostCPUFigures
	b, a := w.Before, w.After
	switch {
	case b.Node != a.Node:
		return f, fmt.Errorf("failed to derive host CPU: readings of two nodes, %s and %s", b.Node, a.Node)
	case b.UserHZ <= 0 || b.UserHZ != a.UserHZ:
		return f, fmt.Errorf("failed to derive host CPU: USER_HZ %d before and %d after", b.UserHZ, a.UserHZ)
	case len(b.Pods) == 0 || len(b.Pods) != len(a.Pods):
		return f, fmt.Errorf("failed to derive host CPU: %d pods before and %d after", len(b.Pods), len(a.Pods))
	case !(w.PayloadBytes > 0):
		return f, fmt.Errorf("failed to derive host CPU: payload %v bytes", w.PayloadBytes)
	}
	for i, p := range b.Pods {
		q := a.Pods[i]
		if p.UID != q.UID || p.Cgroup != q.Cgroup || p.File != q.File {
			return f, fmt.Errorf("failed to derive host CPU: pod %d is %s (%s) before and %s (%s) after", i+1, p.UID, p.Cgroup, q.UID, q.Cgroup)
		}
		if q.UsageUsec < p.UsageUsec {
			return f, fmt.Errorf("failed to derive host CPU: usage_usec of pod %s went back from %d to %d (restarted?)", p.UID, p.UsageUsec, q.UsageUsec)
		}
		f.LauncherCPUSeconds += float64(q.UsageUsec-p.UsageUsec) / 1e6
	}
	s0, err := ProcStatSoftirq(b.ProcStatCPU)
	if err != nil {
		return f, err
	}
	s1, err := ProcStatSoftirq(a.ProcStatCPU)
	if err != nil {
		return f, err
	}
	if s1 < s0 {
		return f, fmt.Errorf("failed to derive host CPU: the node's softirq ticks went back from %d to %d", s0, s1)
	}
	f.SoftirqCPUSeconds = float64(s1-s0) / float64(b.UserHZ)
	f.HostCPUSeconds = f.LauncherCPUSeconds + f.SoftirqCPUSeconds
	if !(f.HostCPUSeconds > 0) {
		return f, fmt.Errorf("failed to derive host CPU: no CPU time counted between %s and %s", b.Time.Format(time.RFC3339Nano), a.Time.Format(time.RFC3339Nano))
	}
	f.HostCPUSecondsPerGB = f.HostCPUSeconds / (w.PayloadBytes / 1e9)
	f.GbpsPerHostCore = w.PayloadBytes * 8 / 1e9 / f.HostCPUSeconds
	return f, nil
}

// procStatSoftirq is the index of softirq in the "cpu" line's fields
// after the label (proc(5): user nice system idle iowait irq softirq ...).
const procStatSoftirq = 6

// ProcStatSoftirq returns the softirq field, in USER_HZ ticks, of a
// /proc/stat "cpu" line.
func ProcStatSoftirq(line string) (uint64, error) {
	f := strings.Fields(line)
	if len(f) < procStatSoftirq+2 || f[0] != "cpu" {
		return 0, fmt.Errorf("failed to parse /proc/stat line %q: want \"cpu\" and at least %d fields", line, procStatSoftirq+1)
	}
	v, err := strconv.ParseUint(f[procStatSoftirq+1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("failed to parse the softirq field of /proc/stat line %q: %w", line, err)
	}
	return v, nil
}

// SetHostCPU records w in s and sets s's figures from it.
func (s *Sample) SetHostCPU(w HostCPUWindow) error {
	f, err := w.Figures()
	if err != nil {
		return err
	}
	s.HostCPU = &w
	s.HostCPUSecondsPerGB, s.GbpsPerHostCore = f.HostCPUSecondsPerGB, f.GbpsPerHostCore
	return nil
}

// RecomputeHostCPU derives every sample's host CPU figures again from the
// readings it recorded and summarises them as Summarize does, returning the
// runs with the recomputed figures; runs without readings keep none. It
// is the held-out check of a results document: its figures must equal
// the document's.
func RecomputeHostCPU(runs []Run) ([]Run, error) {
	out := make([]Run, len(runs))
	for i, r := range runs {
		r.Samples = append([]Sample(nil), r.Samples...)
		for j := range r.Samples {
			s := &r.Samples[j]
			s.HostCPUSecondsPerGB, s.GbpsPerHostCore = 0, 0
			if s.HostCPU == nil {
				continue
			}
			if err := s.SetHostCPU(*s.HostCPU); err != nil {
				return nil, fmt.Errorf("failed to recompute run %d (%s %s) repetition %d: %w", i, r.Path, r.Point(), s.Repetition, err)
			}
		}
		r.Summarize()
		out[i] = r
	}
	return out, nil
}
