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
		Tuning: &NetworkTuning{Candidates: &TuningCandidates{Offloads: []Offloads{{TSO: OffloadOff, RXChecksum: OffloadOff}}}}})
	out := DefaultTuning(net)
	g.Expect(out.Mode).To(Equal(TuningOff))
	g.Expect(out.Objective).To(Equal(ObjectiveThroughput))
	g.Expect(out.Candidates.MTUs).To(Equal([]int32{9000}))
	g.Expect(out.Candidates.Offloads).To(Equal([]Offloads{{TSO: OffloadOff, GSO: OffloadOn, GRO: OffloadOff, TXChecksum: OffloadOn, RXChecksum: OffloadOff}}),
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

func TestWithTunedDefaults(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	before, after := metav1.NewTime(at.Add(-time.Minute)), metav1.NewTime(at.Add(time.Minute))
	allOn := AllOffloads(OffloadOn)
	tunedOffloads := Offloads{TSO: OffloadOn, GSO: OffloadOff, GRO: OffloadOff, TXChecksum: OffloadOn, RXChecksum: OffloadOff}
	// network: bounds 1280-65520, default 9000, every offload On by default;
	// applied MTU 65520 with GSO, GRO and RX checksum Off at "at".
	network := func(mutate func(*FastPathNetwork)) *FastPathNetwork {
		n := &FastPathNetwork{
			Spec: FastPathNetworkSpec{Bridge: "fp0", MTU: &MTURange{Max: ptrTo(int32(65520)), Default: ptrTo(int32(9000))},
				Tuning: &NetworkTuning{Mode: TuningApply}},
			Status: FastPathNetworkStatus{Tuning: &NetworkTuningStatus{
				Applied: &TuningSetting{MTU: 65520, Offloads: tunedOffloads.DeepCopy()}, AppliedAt: &at}},
		}
		if mutate != nil {
			mutate(n)
		}
		return n
	}
	spec := func(mtu *int32, o *Offloads) FastPathAttachmentSpec {
		return FastPathAttachmentSpec{Network: &NetworkSpec{MTU: mtu, Offloads: o, IPAM: IPAMSpec{Subnet: "10.250.0.0/24"}}}
	}
	for _, tc := range []struct {
		name     string
		network  *FastPathNetwork
		spec     FastPathAttachmentSpec
		created  metav1.Time
		mtu      *int32    // want spec.network.mtu
		offloads *Offloads // want spec.network.offloads
	}{
		{"a new attachment gets the MTU and every offload",
			network(nil), spec(nil, nil), after, ptrTo(int32(65520)), &tunedOffloads},
		{"created at appliedAt counts as new",
			network(nil), spec(nil, nil), at, ptrTo(int32(65520)), &tunedOffloads},
		{"the attachment's own MTU is kept, the offloads still apply",
			network(nil), spec(ptrTo(int32(1500)), nil), after, ptrTo(int32(1500)), &tunedOffloads},
		{"only the offload keys the attachment does not set are filled",
			network(nil), spec(nil, &Offloads{GRO: OffloadOn, TSO: OffloadOff}), after, ptrTo(int32(65520)),
			&Offloads{TSO: OffloadOff, GSO: OffloadOff, GRO: OffloadOn, TXChecksum: OffloadOn, RXChecksum: OffloadOff}},
		{"an existing attachment is left alone",
			network(nil), spec(nil, nil), before, nil, nil},
		{"Recommend applies nothing",
			network(func(n *FastPathNetwork) { n.Spec.Tuning.Mode = TuningRecommend }), spec(nil, nil), after, nil, nil},
		{"Off restores the defaults",
			network(func(n *FastPathNetwork) { n.Spec.Tuning.Mode = TuningOff }), spec(nil, nil), after, nil, nil},
		{"nothing applied yet",
			network(func(n *FastPathNetwork) { n.Status.Tuning.Applied = nil }), spec(nil, nil), after, nil, nil},
		{"an MTU outside the bounds is not applied, the offloads are",
			network(func(n *FastPathNetwork) { n.Spec.MTU.Max = ptrTo(int32(9000)) }), spec(nil, nil), after, nil, &tunedOffloads},
		{"offloadPolicy Fixed: the network's offloads stay the only ones",
			network(func(n *FastPathNetwork) { n.Spec.OffloadPolicy = OffloadPolicyFixed }), spec(nil, nil), after, ptrTo(int32(65520)), nil},
		{"Macvtap: an offload Off is never applied",
			network(func(n *FastPathNetwork) { n.Spec.Datapath = DatapathMacvtap }), spec(nil, nil), after, ptrTo(int32(65520)), nil},
		{"Macvtap: all On is applied",
			network(func(n *FastPathNetwork) {
				n.Spec.Datapath = DatapathMacvtap
				n.Status.Tuning.Applied.Offloads = allOn.DeepCopy()
			}), spec(nil, nil), after, ptrTo(int32(65520)), &allOn},
		{"keys the applied set leaves unset take spec.offloads",
			network(func(n *FastPathNetwork) {
				n.Spec.Offloads = &Offloads{GSO: OffloadOff}
				n.Status.Tuning.Applied.Offloads = &Offloads{TSO: OffloadOff}
			}), spec(nil, nil), after, ptrTo(int32(65520)), &Offloads{TSO: OffloadOff, GSO: OffloadOff, GRO: OffloadOn, TXChecksum: OffloadOn, RXChecksum: OffloadOn}},
		{"an applied setting without offloads applies the MTU only",
			network(func(n *FastPathNetwork) { n.Status.Tuning.Applied.Offloads = nil }), spec(nil, nil), after, ptrTo(int32(65520)), nil},
		{"tuned offloads that would put TSO on without TX checksum are not filled",
			network(func(n *FastPathNetwork) {
				n.Status.Tuning.Applied.Offloads = &Offloads{TSO: OffloadOff, GSO: OffloadOn, GRO: OffloadOn, TXChecksum: OffloadOff}
			}), spec(nil, &Offloads{TSO: OffloadOn}), after, ptrTo(int32(65520)), &Offloads{TSO: OffloadOn}},
		{"the same tuned offloads fill an attachment that leaves TSO unset",
			network(func(n *FastPathNetwork) {
				n.Status.Tuning.Applied.Offloads = &Offloads{TSO: OffloadOff, GSO: OffloadOn, GRO: OffloadOn, TXChecksum: OffloadOff}
			}), spec(nil, &Offloads{GRO: OffloadOff}), after, ptrTo(int32(65520)),
			&Offloads{TSO: OffloadOff, GSO: OffloadOn, GRO: OffloadOff, TXChecksum: OffloadOff, RXChecksum: OffloadOn}},
		{"no spec.network: unchanged",
			network(nil), FastPathAttachmentSpec{}, after, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := *tc.spec.DeepCopy()
			got := WithTunedDefaults(tc.spec, tc.network, tc.created)
			g.Expect(tc.spec).To(Equal(in), "the argument must not be mutated")
			if got.Network == nil {
				g.Expect(tc.mtu).To(BeNil())
				g.Expect(tc.offloads).To(BeNil())
				return
			}
			g.Expect(got.Network.MTU).To(Equal(tc.mtu))
			g.Expect(got.Network.Offloads).To(Equal(tc.offloads))
		})
	}
}
