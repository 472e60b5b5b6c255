package v1alpha1

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDefaultTuningFillsEveryField(t *testing.T) {
	g := NewWithT(t)
	net := DefaultNetworkSpec(FastPathNetworkSpec{Bridge: "fp0", Offloads: &Offloads{GRO: OffloadOff},
		Tuning: &NetworkTuning{Candidates: &TuningCandidates{Offloads: []Offloads{{TSO: OffloadOff}}}}})
	out := DefaultTuning(net)
	g.Expect(out.Mode).To(Equal(TuningOff))
	g.Expect(out.Objective).To(Equal(ObjectiveThroughput))
	g.Expect(out.Candidates.MTUs).To(Equal([]int32{9000}))
	g.Expect(out.Candidates.Offloads).To(Equal([]Offloads{{TSO: OffloadOff, GSO: OffloadOn, GRO: OffloadOff, TXChecksum: OffloadOn}}),
		"unset keys of a candidate take the network's offloads")
	g.Expect(*out.Repetitions).To(Equal(int32(3)))
	g.Expect(out.Duration.Duration).To(Equal(10 * time.Second))
	g.Expect(*out.Remeasure.OnNodeChange).To(BeTrue())
	g.Expect(out.Remeasure.MinInterval.Duration).To(Equal(24 * time.Hour))
	g.Expect(net.Tuning.Candidates.Offloads[0].GSO).To(BeEmpty(), "the argument must not be mutated")
}

func TestTunedDefaultMTU(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	before, after := metav1.NewTime(at.Add(-time.Minute)), metav1.NewTime(at.Add(time.Minute))
	net := func(mode TuningMode, mtu int32) *FastPathNetwork {
		return &FastPathNetwork{
			Spec: FastPathNetworkSpec{Bridge: "fp0", MTU: &MTURange{Max: ptrTo(int32(65520))}, Tuning: &NetworkTuning{Mode: mode}},
			Status: FastPathNetworkStatus{Tuning: &NetworkTuningStatus{
				Applied: &TuningSetting{MTU: mtu}, AppliedAt: &at}},
		}
	}
	for _, tc := range []struct {
		name    string
		network *FastPathNetwork
		created metav1.Time
		want    int32
		ok      bool
	}{
		{"apply, new attachment", net(TuningApply, 65520), after, 65520, true},
		{"apply, created at appliedAt", net(TuningApply, 65520), at, 65520, true},
		{"apply, existing attachment is left alone", net(TuningApply, 65520), before, 0, false},
		{"recommend never applies", net(TuningRecommend, 65520), after, 0, false},
		{"off restores the default", net(TuningOff, 65520), after, 0, false},
		{"outside the bounds is never applied", net(TuningApply, 1000), after, 0, false},
		{"no tuning", &FastPathNetwork{Spec: FastPathNetworkSpec{Bridge: "fp0"}}, after, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := TunedDefaultMTU(tc.network, tc.created)
			g.Expect(ok).To(Equal(tc.ok))
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
