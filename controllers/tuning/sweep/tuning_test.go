package sweep

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

func TestOrderAlternates(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Order(3, 3)).To(Equal([]Step{
		{0, 0}, {1, 0}, {2, 0}, {2, 1}, {1, 1}, {0, 1}, {0, 2}, {1, 2}, {2, 2}}))
	g.Expect(Order(0, 3)).To(BeEmpty())
}

func TestEvidenceMedianMinMax(t *testing.T) {
	g := NewWithT(t)
	ev := Evidence(v1alpha1.TuningSetting{MTU: 9000}, []Rep{
		{Mbps: 14000, ServiceDemandUsPerKB: 0.30, LatencyUs: 40},
		{Mbps: 12000.4, ServiceDemandUsPerKB: 0.50, LatencyUs: 60},
		{Mbps: 15000, ServiceDemandUsPerKB: 0.20, LatencyUs: 50},
	})
	g.Expect(ev).To(Equal(v1alpha1.TuningEvidence{MTU: 9000, Repetitions: 3,
		MedianMbps: 14000, MinMbps: 12000, MaxMbps: 15000, ServiceDemandUsPerKB: "0.300", MeanLatencyUs: "50.0"}))
}

func TestEvidenceFailedRepetitionFailsTheCandidate(t *testing.T) {
	g := NewWithT(t)
	ev := Evidence(v1alpha1.TuningSetting{MTU: 65520}, []Rep{{Mbps: 20000}, {Failed: "NetserverUnreachable: lost"}, {Mbps: 21000}})
	g.Expect(ev.Failed).To(Equal("repetition 2: NetserverUnreachable: lost"))
	g.Expect(ev.Repetitions).To(Equal(int32(2)))
	g.Expect(Evidence(v1alpha1.TuningSetting{MTU: 1500}, nil).Failed).NotTo(BeEmpty())
}

func TestChoose(t *testing.T) {
	ev := []v1alpha1.TuningEvidence{
		{MTU: 1500, Repetitions: 3, MedianMbps: 10000, ServiceDemandUsPerKB: "0.400", MeanLatencyUs: "30.0"},
		{MTU: 9000, Repetitions: 3, MedianMbps: 15000, ServiceDemandUsPerKB: "0.300", MeanLatencyUs: "35.0"},
		{MTU: 65520, Repetitions: 3, MedianMbps: 13000, ServiceDemandUsPerKB: "0.200", MeanLatencyUs: "40.0"},
	}
	failedBest := append(append([]v1alpha1.TuningEvidence{}, ev...), v1alpha1.TuningEvidence{MTU: 4000, Repetitions: 2, MedianMbps: 90000, Failed: "lost connection"})
	for _, tc := range []struct {
		name      string
		ev        []v1alpha1.TuningEvidence
		objective v1alpha1.TuningObjective
		min, max  int32
		best      int
		margin    string
		ok        bool
	}{
		{"throughput", ev, v1alpha1.ObjectiveThroughput, 1280, 65535, 1, "15.4", true},
		{"cpu per byte", ev, v1alpha1.ObjectiveCPUPerByte, 1280, 65535, 2, "33.3", true},
		{"latency", ev, v1alpha1.ObjectiveLatency, 1280, 65535, 0, "14.3", true},
		{"a failed candidate is never chosen", failedBest, v1alpha1.ObjectiveThroughput, 1280, 65535, 1, "15.4", true},
		{"never outside the bounds", ev, v1alpha1.ObjectiveCPUPerByte, 1280, 9000, 1, "25.0", true},
		{"one candidate has no margin", ev[:1], v1alpha1.ObjectiveThroughput, 1280, 65535, 0, "", true},
		{"nothing qualifies", failedBest[3:], v1alpha1.ObjectiveThroughput, 1280, 65535, 0, "", false},
		{"latency not measured", []v1alpha1.TuningEvidence{{MTU: 1500, Repetitions: 3, MedianMbps: 1}}, v1alpha1.ObjectiveLatency, 1280, 65535, 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			best, margin, ok := Choose(tc.ev, tc.objective, tc.min, tc.max)
			g.Expect(ok).To(Equal(tc.ok))
			g.Expect(best).To(Equal(tc.best))
			g.Expect(margin).To(Equal(tc.margin))
		})
	}
}

var (
	allOn  = v1alpha1.AllOffloads(v1alpha1.OffloadOn)
	groOff = func() *v1alpha1.Offloads {
		o := v1alpha1.AllOffloads(v1alpha1.OffloadOn)
		o.GRO = v1alpha1.OffloadOff
		return &o
	}()
)

func TestOffloadDiffs(t *testing.T) {
	g := NewWithT(t)
	g.Expect(OffloadDiffs(allOn, allOn)).To(BeEmpty())
	g.Expect(OffloadDiffs(allOn, *groOff)).To(Equal([]string{"gro asked On, negotiated Off"}))
	g.Expect(OffloadDiffs(*groOff, allOn)).To(Equal([]string{"gro asked Off, negotiated On"}))
	g.Expect(OffloadDiffs(allOn, v1alpha1.Offloads{TSO: v1alpha1.OffloadOn, GSO: v1alpha1.OffloadOff})).To(Equal([]string{
		"gso asked On, negotiated Off", "gro asked On, negotiated unknown", "txChecksum asked On, negotiated unknown", "rxChecksum asked On, negotiated unknown"}))
	g.Expect(OffloadDiffs(v1alpha1.Offloads{GRO: v1alpha1.OffloadOn}, *groOff)).To(Equal([]string{"gro asked On, negotiated Off"}), "only what was asked is compared")
}

// A candidate whose path negotiated other offloads than it asked for, in
// any repetition, or reported none, carries the reason and the offloads
// it had, and is never chosen, however fast.
func TestEvidenceOffloadMismatchIsNeverChosen(t *testing.T) {
	g := NewWithT(t)
	on := &allOn
	asked := v1alpha1.TuningSetting{MTU: 9000, Offloads: on}
	ok := Evidence(asked, []Rep{{Mbps: 10000, Negotiated: on}, {Mbps: 10100, Negotiated: on}, {Mbps: 10200, Negotiated: on}})
	g.Expect(ok.OffloadMismatch).To(BeEmpty())
	g.Expect(ok.NegotiatedOffloads).To(Equal(on))

	silent := Evidence(v1alpha1.TuningSetting{MTU: 65520, Offloads: on}, []Rep{{Mbps: 30000, Negotiated: on}, {Mbps: 31000, Negotiated: groOff}, {Mbps: 30500, Negotiated: on}})
	g.Expect(silent.OffloadMismatch).To(Equal("repetition 2: gro asked On, negotiated Off"))
	g.Expect(silent.NegotiatedOffloads).To(Equal(groOff), "the evidence shows the offloads that differ")
	g.Expect(silent.Failed).To(BeEmpty(), "the figures stay as measured")
	g.Expect(silent.MedianMbps).To(Equal(int64(30500)))

	unknown := Evidence(v1alpha1.TuningSetting{MTU: 1500, Offloads: on}, []Rep{{Mbps: 40000}, {Mbps: 40000, Negotiated: on}})
	g.Expect(unknown.OffloadMismatch).To(ContainSubstring("repetition 1: the benchmark reported no negotiated offloads"))
	g.Expect(unknown.NegotiatedOffloads).To(Equal(on), "what a later repetition reported")

	for _, objective := range []v1alpha1.TuningObjective{v1alpha1.ObjectiveThroughput, v1alpha1.ObjectiveCPUPerByte, v1alpha1.ObjectiveLatency} {
		ev := []v1alpha1.TuningEvidence{silent, unknown, ok}
		for i := range ev {
			ev[i].ServiceDemandUsPerKB, ev[i].MeanLatencyUs = "0.300", "30.0"
		}
		ev[0].ServiceDemandUsPerKB, ev[0].MeanLatencyUs = "0.100", "10.0" // the mismatch is best by every objective
		best, _, chosen := Choose(ev, objective, 1280, 65535)
		g.Expect(chosen).To(BeTrue())
		g.Expect(best).To(Equal(2), "%s", objective)
		rec, chosen := Recommend(ev, objective, 1280, 65535)
		g.Expect(chosen).To(BeTrue())
		g.Expect(rec.Best).To(Equal(2), "%s", objective)
		g.Expect(rec.Message).To(ContainSubstring("2 candidate(s) left out: their path negotiated other offloads"))
	}
	_, _, chosen := Choose([]v1alpha1.TuningEvidence{silent, unknown}, v1alpha1.ObjectiveThroughput, 1280, 65535)
	g.Expect(chosen).To(BeFalse(), "nothing is recommended when every candidate's offloads differ")

	none := Evidence(v1alpha1.TuningSetting{MTU: 9000}, []Rep{{Mbps: 10000}})
	g.Expect(none.OffloadMismatch).To(BeEmpty(), "a candidate that asks no offloads has none to check")
}

// The flat-curve rule: when the repetitions' min-max throughput ranges of
// every MTU at the winner's offloads overlap, the smallest MTU is
// recommended and the status says so; otherwise the fastest.
func TestRecommendFlatMTUCurve(t *testing.T) {
	on := &allOn
	ev := func(mtu int32, lo, med, hi int64) v1alpha1.TuningEvidence {
		return v1alpha1.TuningEvidence{MTU: mtu, Offloads: on, Repetitions: 3, MinMbps: lo, MedianMbps: med, MaxMbps: hi, ServiceDemandUsPerKB: "0.300"}
	}
	flat := []v1alpha1.TuningEvidence{ev(1500, 13800, 14000, 14300), ev(9000, 14100, 14400, 14600), ev(65520, 14000, 14200, 14500)}
	// 1500's range ends below 9000's starts: not flat, though 1500 and 65520 overlap.
	sloped := []v1alpha1.TuningEvidence{ev(1500, 13000, 13500, 14000), ev(9000, 14100, 14400, 14600), ev(65520, 13900, 14200, 14500)}
	mismatchedSmall := append([]v1alpha1.TuningEvidence{}, flat...)
	mismatchedSmall[0].OffloadMismatch = "repetition 1: tso asked On, negotiated Off"
	otherOffloads := append([]v1alpha1.TuningEvidence{}, flat...)
	otherOffloads[0].Offloads = groOff
	for _, tc := range []struct {
		name      string
		ev        []v1alpha1.TuningEvidence
		objective v1alpha1.TuningObjective
		best      int
		curve     v1alpha1.NoiseVerdict
		margin    string
		message   string
	}{
		{"flat: the smallest MTU", flat, v1alpha1.ObjectiveThroughput, 0, v1alpha1.WithinNoise, "-2.8",
			"MTU curve flat within noise: the TCP_STREAM ranges (Mbit/s) of MTU 1500 (13800-14300), 9000 (14100-14600), 65520 (14000-14500) overlap, so the smallest, MTU 1500, is recommended (median 14000 Mbit/s, -2.8% from MTU 9000's 14400): the same speed with less memory per ring"},
		{"beyond noise: the fastest", sloped, v1alpha1.ObjectiveThroughput, 1, v1alpha1.BeyondNoise, "1.4", "MTU 9000 wins by Throughput, 1.4% over the runner-up; the MTU curve is beyond noise"},
		{"judged under Throughput only", flat, v1alpha1.ObjectiveCPUPerByte, 0, "", "0.0", "MTU 1500 wins by CPUPerByte, 0.0% over the runner-up"},
		{"a mismatched MTU is not on the curve", mismatchedSmall, v1alpha1.ObjectiveThroughput, 1, v1alpha1.WithinNoise, "0.0", "the smallest, MTU 9000, is recommended"},
		{"the curve is the winner's offload set", otherOffloads, v1alpha1.ObjectiveThroughput, 1, v1alpha1.WithinNoise, "0.0", "ranges (Mbit/s) of MTU 9000 (14100-14600), 65520 (14000-14500) overlap"},
		{"one MTU has no curve", flat[1:2], v1alpha1.ObjectiveThroughput, 0, "", "", "MTU 9000 wins by Throughput"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec, ok := Recommend(tc.ev, tc.objective, 1280, 65535)
			g.Expect(ok).To(BeTrue())
			g.Expect(rec.Best).To(Equal(tc.best))
			g.Expect(rec.Curve).To(Equal(tc.curve))
			g.Expect(rec.MarginPercent).To(Equal(tc.margin))
			g.Expect(rec.Message).To(ContainSubstring(tc.message))
		})
	}
}
