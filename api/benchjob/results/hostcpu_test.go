package results_test

import (
	"os"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

const (
	clientUID = "6f1c2b9a-6d1e-4f0b-9a51-0c7d3e2a1b01"
	serverUID = "0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f02"
	// A /proc/stat cpu line: softirq (the 7th number) is 1000 ticks.
	stat0 = "cpu  84512 130 40215 1920450 812 0 1000 0 0 0"
)

func reading(at time.Time, stat string, client, server uint64) results.HostCPUReading {
	return results.HostCPUReading{Time: at, Node: "node-1", UserHZ: 100, ProcStatCPU: stat, Pods: []results.PodCPU{
		{UID: clientUID, Cgroup: "kubepods.slice/kubepods-pod" + clientUID + ".slice", UsageUsec: client},
		{UID: serverUID, Cgroup: "kubepods.slice/kubepods-pod" + serverUID + ".slice", UsageUsec: server},
	}}
}

func TestHostCPUFigures(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	t1 := t0.Add(6 * time.Second)
	before := reading(t0, stat0, 10_000_000, 20_000_000)
	cases := []struct {
		name    string
		after   results.HostCPUReading
		bytes   float64
		want    results.HostCPUFigures
		wantErr string
	}{{
		// 4.0 s + 3.5 s in the launchers, 30 ticks (0.3 s) of softirq, for
		// 250 MB (400 Mbit/s for 5 s): 7.8 s, 31.2 s/GB, 2 Gbit / 7.8 s.
		name:  "launchers and softirq",
		after: reading(t1, "cpu  85312 130 40915 1920950 812 0 1030 0 0 0", 14_000_000, 23_500_000),
		bytes: 250e6,
		want:  results.HostCPUFigures{LauncherCPUSeconds: 7.5, SoftirqCPUSeconds: 0.3, HostCPUSeconds: 7.8, HostCPUSecondsPerGB: 31.2, GbpsPerHostCore: 2 / 7.8},
	}, {
		// A kernel without softirq time (it left the field at 0) still has
		// the launchers' time.
		name:  "no softirq counted",
		after: reading(t1, stat0, 10_500_000, 20_500_000),
		bytes: 1e9,
		want:  results.HostCPUFigures{LauncherCPUSeconds: 1, HostCPUSeconds: 1, HostCPUSecondsPerGB: 1, GbpsPerHostCore: 8},
	}, {
		name:    "a launcher restarted",
		after:   reading(t1, stat0, 9_000_000, 20_500_000),
		bytes:   1e9,
		wantErr: "usage_usec of pod " + clientUID + " went back from 10000000 to 9000000",
	}, {
		name:    "nothing spent",
		after:   reading(t1, stat0, 10_000_000, 20_000_000),
		bytes:   1e9,
		wantErr: "no CPU time counted",
	}, {
		name:    "nothing moved",
		after:   reading(t1, stat0, 11_000_000, 20_000_000),
		wantErr: "payload 0 bytes",
	}, {
		name: "a pod missing after",
		after: func() results.HostCPUReading {
			r := reading(t1, stat0, 11_000_000, 21_000_000)
			r.Pods = r.Pods[:1]
			return r
		}(),
		bytes:   1e9,
		wantErr: "2 pods before and 1 after",
	}, {
		name: "another node",
		after: func() results.HostCPUReading {
			r := reading(t1, stat0, 11_000_000, 21_000_000)
			r.Node = "node-2"
			return r
		}(),
		bytes:   1e9,
		wantErr: "readings of two nodes, node-1 and node-2",
	}, {
		name:    "not a cpu line",
		after:   reading(t1, "cpu0 1 2 3", 11_000_000, 21_000_000),
		bytes:   1e9,
		wantErr: `failed to parse /proc/stat line "cpu0 1 2 3"`,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			f, err := results.HostCPUWindow{Before: before, After: c.after, PayloadBytes: c.bytes}.Figures()
			if c.wantErr != "" {
				g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(c.wantErr)))
				return
			}
			g.Expect(err).NotTo(gomega.HaveOccurred())
			for _, v := range [][2]float64{
				{f.LauncherCPUSeconds, c.want.LauncherCPUSeconds}, {f.SoftirqCPUSeconds, c.want.SoftirqCPUSeconds},
				{f.HostCPUSeconds, c.want.HostCPUSeconds}, {f.HostCPUSecondsPerGB, c.want.HostCPUSecondsPerGB}, {f.GbpsPerHostCore, c.want.GbpsPerHostCore},
			} {
				g.Expect(v[0]).To(gomega.BeNumerically("~", v[1], 1e-9), "%+v", f)
			}
		})
	}
}

// The held-out check: a VM-mode results document as the runner recorded it
// (testdata/hostcpu-results.json: three repetitions per path, the agent's
// readings in each) gives back its own figures from the readings alone, and
// a tampered reading changes them.
func TestRecomputeHostCPUFromRecordedReadings(t *testing.T) {
	g := gomega.NewWithT(t)
	f, err := os.Open("testdata/hostcpu-results.json")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	defer f.Close()
	doc, err := results.Decode(f)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Runs).To(gomega.HaveLen(2))
	got, err := results.RecomputeHostCPU(doc.Runs)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for i, r := range doc.Runs {
		g.Expect(r.HostCPUSecondsPerGB).To(gomega.BeNumerically(">", 0), r.Path)
		g.Expect(r.GbpsPerHostCore).To(gomega.BeNumerically(">", 0), r.Path)
		g.Expect(got[i].HostCPUSecondsPerGB).To(gomega.BeNumerically("~", r.HostCPUSecondsPerGB, 1e-9), r.Path)
		g.Expect(got[i].GbpsPerHostCore).To(gomega.BeNumerically("~", r.GbpsPerHostCore, 1e-9), r.Path)
		g.Expect(got[i].HostCPUSecondsPerGBMin).To(gomega.BeNumerically("~", r.HostCPUSecondsPerGBMin, 1e-9), r.Path)
		g.Expect(got[i].HostCPUSecondsPerGBMax).To(gomega.BeNumerically("~", r.HostCPUSecondsPerGBMax, 1e-9), r.Path)
	}
	// By hand, the fast path's median repetition: 4.10 + 3.70 s in the
	// launchers and 21 ticks of softirq for 447.6 Mbit/s over 5 s.
	g.Expect(doc.Runs[0].HostCPUSecondsPerGB).To(gomega.BeNumerically("~", (4.10+3.70+0.21)/(447.6e6/8*5/1e9), 1e-9))
	g.Expect(doc.Runs[0].GbpsPerHostCore).To(gomega.BeNumerically("~", 447.6e-3*5/(4.10+3.70+0.21), 1e-9))
	// The fast path moved more bytes for less of the host's CPU.
	g.Expect(doc.Runs[0].Path).To(gomega.Equal("fastpath"))
	g.Expect(doc.Runs[0].HostCPUSecondsPerGB).To(gomega.BeNumerically("<", doc.Runs[1].HostCPUSecondsPerGB))

	// The figures come from the readings, not from the stored figures.
	tampered := doc.Runs[0]
	tampered.Samples = append([]results.Sample(nil), tampered.Samples...)
	for j := range tampered.Samples {
		w := *tampered.Samples[j].HostCPU
		w.After.Pods = append([]results.PodCPU(nil), w.After.Pods...)
		w.After.Pods[0].UsageUsec += 5_000_000
		tampered.Samples[j].HostCPU = &w
	}
	again, err := results.RecomputeHostCPU([]results.Run{tampered})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(again[0].HostCPUSecondsPerGB).To(gomega.BeNumerically(">", doc.Runs[0].HostCPUSecondsPerGB))
}
