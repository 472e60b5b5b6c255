package report

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

func TestWriteTuningReport(t *testing.T) {
	g := NewWithT(t)
	on := &v1alpha1.Offloads{TSO: "On", GSO: "On", GRO: "On", TXChecksum: "On", RXChecksum: "On"}
	st := &v1alpha1.NetworkTuningStatus{Nodes: []v1alpha1.NodeTuning{{
		Node: "n1", Kernel: "6.18", Datapath: "LinuxBridge", MarginPercent: "12.5",
		Recommended: &v1alpha1.TuningSetting{MTU: 9000, Offloads: on},
		Evidence: []v1alpha1.TuningEvidence{
			{MTU: 1500, Offloads: on, Repetitions: 3, MedianMbps: 10000, MinMbps: 9000, MaxMbps: 11000, ServiceDemandUsPerKB: "0.400"},
			{MTU: 9000, Offloads: on, Repetitions: 3, MedianMbps: 20000, MinMbps: 18000, MaxMbps: 20000, ServiceDemandUsPerKB: "0.300"},
			{MTU: 65520, Offloads: on, Repetitions: 2, Failed: "repetition 1: lost"},
		}}}}
	var b bytes.Buffer
	g.Expect(WriteTuningReport(&b, st, v1alpha1.ObjectiveThroughput)).To(Succeed())
	out := b.String()
	g.Expect(out).To(ContainSubstring("9000 *"))
	g.Expect(out).To(ContainSubstring("10.00 (9.00-11.00)"))
	g.Expect(out).To(ContainSubstring("Recommended: * MTU 9000"))
	g.Expect(out).To(ContainSubstring("12.5% over the runner-up"))
	g.Expect(out).To(ContainSubstring("repetition 1: lost"))
	g.Expect(out).To(ContainSubstring("    9000  ###################################|#### 20.00"))
	g.Expect(out).To(ContainSubstring("    1500  #################|##--"))
	g.Expect(out).To(ContainSubstring(" 65520  (failed)"))

	g.Expect(out).To(ContainSubstring("NEGOTIATED"))

	// The negotiated offloads: as asked, others (the candidate left out and
	// why), or not reported; a flat curve's recommendation says so.
	groOff := &v1alpha1.Offloads{TSO: "On", GSO: "On", GRO: "Off", TXChecksum: "On", RXChecksum: "On"}
	n := &st.Nodes[0]
	n.Evidence[0].NegotiatedOffloads = on
	n.Evidence[1].NegotiatedOffloads, n.Evidence[1].OffloadMismatch = groOff, "repetition 2: gro asked On, negotiated Off"
	n.Recommended, n.MTUCurve, n.MarginPercent, n.Message = &v1alpha1.TuningSetting{MTU: 1500, Offloads: on}, v1alpha1.WithinNoise, "-2.8", "MTU curve flat within noise: ..."
	b.Reset()
	g.Expect(WriteTuningReport(&b, st, v1alpha1.ObjectiveThroughput)).To(Succeed())
	out = b.String()
	g.Expect(out).To(MatchRegexp(`1500 \* +tso=On,gso=On,gro=On,txChecksum=On,rxChecksum=On +as asked +3 `))
	g.Expect(out).To(MatchRegexp(`9000 +tso=On,gso=On,gro=On,txChecksum=On,rxChecksum=On +tso=On,gso=On,gro=Off,txChecksum=On,rxChecksum=On +3 .*offloads: repetition 2: gro asked On, negotiated Off`))
	g.Expect(out).To(MatchRegexp(`65520 +tso=On,gso=On,gro=On,txChecksum=On,rxChecksum=On +- +2 `))
	g.Expect(out).To(ContainSubstring("Recommended: * MTU 1500, offloads tso=On,gso=On,gro=On,txChecksum=On,rxChecksum=On (MTU curve flat within noise: -2.8% from the fastest)\nWhy: MTU curve flat within noise: ...\n"))

	b.Reset()
	off := &v1alpha1.Offloads{TSO: "On", GSO: "Off", GRO: "Off", TXChecksum: "On", RXChecksum: "Off"}
	st.Applied = &v1alpha1.TuningSetting{MTU: 9000, Offloads: off}
	st.Differing = []v1alpha1.TuningDifference{{Namespace: "apps", Name: "db", MTU: 1500, Offloads: on, Restart: "set spec.network.mtu to 9000, then restart its VMs"}}
	g.Expect(WriteTuningReport(&b, st, v1alpha1.ObjectiveThroughput)).To(Succeed())
	g.Expect(b.String()).To(ContainSubstring("Applied: new attachments default to MTU 9000, offloads tso=On,gso=Off,gro=Off,txChecksum=On,rxChecksum=Off\n"))
	g.Expect(b.String()).To(ContainSubstring("  apps/db has MTU 1500, offloads tso=On,gso=On,gro=On,txChecksum=On,rxChecksum=On: set spec.network.mtu to 9000, then restart its VMs\n"))

	b.Reset()
	g.Expect(WriteTuningReport(&b, nil, v1alpha1.ObjectiveThroughput)).To(Succeed())
	g.Expect(b.String()).To(Equal("No node measured yet.\n"))
}
