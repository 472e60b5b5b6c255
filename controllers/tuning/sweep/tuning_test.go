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
