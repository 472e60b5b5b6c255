package v1alpha1

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDefaultAttachmentSpecFillsEveryNetworkField(t *testing.T) {
	g := NewWithT(t)
	in := FastPathAttachmentSpec{Network: &NetworkSpec{IPAM: IPAMSpec{Subnet: "10.250.0.0/24"}}}
	out := DefaultAttachmentSpec(in)

	g.Expect(out.Placement).To(Equal(PlacementRequired))
	g.Expect(out.Network.Datapath).To(Equal(DatapathLinuxBridge))
	g.Expect(out.Network.Bridge).To(Equal("fastpath0"))
	g.Expect(*out.Network.MTU).To(Equal(int32(9000)))
	g.Expect(*out.Network.Offloads).To(Equal(Offloads{TSO: OffloadOn, GSO: OffloadOn, GRO: OffloadOn, TXChecksum: OffloadOn, RXChecksum: OffloadOn}))
	g.Expect(*out.Network.RxQueueSize).To(Equal(int32(1024)))
	g.Expect(*out.Network.TxQueueSize).To(Equal(int32(256)))
	g.Expect(*out.Network.Queues).To(Equal(int32(1)))
	g.Expect(out.VSOCK).To(BeNil(), "vsock is not defaulted into existence")
	g.Expect(in.Network.MTU).To(BeNil(), "the argument must not be mutated")
}

func TestDefaultAttachmentSpecKeepsUserValues(t *testing.T) {
	g := NewWithT(t)
	mtu, q := int32(65000), int32(4)
	in := FastPathAttachmentSpec{
		Placement: PlacementNone,
		Network: &NetworkSpec{Datapath: DatapathOVS, Bridge: "br-fast", MTU: &mtu, Queues: &q,
			Offloads: &Offloads{GRO: OffloadOff}, IPAM: IPAMSpec{Subnet: "10.1.0.0/16"}},
	}
	out := DefaultAttachmentSpec(in)
	g.Expect(out.Placement).To(Equal(PlacementNone))
	g.Expect(out.Network.Datapath).To(Equal(DatapathOVS))
	g.Expect(out.Network.Bridge).To(Equal("br-fast"))
	g.Expect(*out.Network.MTU).To(Equal(int32(65000)))
	g.Expect(*out.Network.Queues).To(Equal(int32(4)))
	g.Expect(out.Network.Offloads.GRO).To(Equal(OffloadOff))
	g.Expect(out.Network.Offloads.TSO).To(Equal(OffloadOn))
	g.Expect(in.Network.Offloads.TSO).To(BeEmpty(), "the argument must not be mutated")
}

func TestDefaultBenchmarkSpec(t *testing.T) {
	g := NewWithT(t)
	out := DefaultBenchmarkSpec(FastPathBenchmarkSpec{})
	g.Expect(out.Mode).To(Equal(BenchmarkModeVM))
	g.Expect(out.Tests).To(Equal([]BenchmarkTest{TestTCPStream, TestTCPRR}))
	g.Expect(out.SocketSizes).To(Equal([]int32{65536, 262144}))
	g.Expect(out.MessageSizes).To(Equal([]int32{512, 4096, 16384, 65536}))
	g.Expect(out.Sessions).To(Equal([]int32{1, 5}))
	g.Expect(out.Duration.Duration).To(Equal(60 * time.Second))
	g.Expect(*out.Repetitions).To(Equal(int32(3)))
	g.Expect(*out.Pairs).To(Equal(int32(1)))
	g.Expect(out.Baseline).To(Equal(BaselinePodNetwork))

	out.SocketSizes[0] = 1
	g.Expect(DefaultSocketSizes[0]).To(Equal(int32(65536)), "defaults must be copied, not aliased")

	kept := DefaultBenchmarkSpec(FastPathBenchmarkSpec{Mode: BenchmarkModePod, Duration: &metav1.Duration{Duration: time.Second}, Baseline: BaselineNone})
	g.Expect(kept.Mode).To(Equal(BenchmarkModePod))
	g.Expect(kept.Duration.Duration).To(Equal(time.Second))
	g.Expect(kept.Baseline).To(Equal(BaselineNone))
}

func TestOffloadStateOn(t *testing.T) {
	g := NewWithT(t)
	g.Expect(OffloadOn.On()).To(BeTrue())
	g.Expect(OffloadState("").On()).To(BeTrue())
	g.Expect(OffloadOff.On()).To(BeFalse())
}
