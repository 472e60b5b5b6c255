package domaintuning

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

// designExample is the annotation of docs/design.md §3.1, compacted.
const designExample = `{"interfaces":{"fp-db-link":{"mtu":9000,"queues":4,"rxQueueSize":1024,"txQueueSize":256,"offloads":{"tso":"On","gso":"On","gro":"On","txChecksum":"On","rxChecksum":"On"}}}}`

func ptr[T any](v T) *T { return &v }

func TestFromNetworkSpecMarshalsTheDesignExample(t *testing.T) {
	g := gomega.NewWithT(t)
	spec := v1alpha1.DefaultAttachmentSpec(v1alpha1.FastPathAttachmentSpec{
		Network: &v1alpha1.NetworkSpec{Queues: ptr(int32(4)), IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}},
	})
	a := Annotation{Interfaces: map[string]Interface{"fp-db-link": FromNetworkSpec(*spec.Network)}}
	got, err := a.Marshal()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(designExample))

	back, err := Parse(got)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(back).To(gomega.Equal(a))
}

func TestMarshalIsDeterministic(t *testing.T) {
	g := gomega.NewWithT(t)
	a := Annotation{Interfaces: map[string]Interface{
		"fp-b": {MTU: 65535}, "fp-a": {MTU: 1500, Offloads: Offloads{GRO: v1alpha1.OffloadOff}}, "fp-c": {},
	}}
	first, err := a.Marshal()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(first).To(gomega.Equal(`{"interfaces":{"fp-a":{"mtu":1500,"offloads":{"gro":"Off"}},"fp-b":{"mtu":65535},"fp-c":{}}}`))
	for range 20 {
		again, err := a.Marshal()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(again).To(gomega.Equal(first))
	}
	empty, err := Annotation{}.Marshal()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(empty).To(gomega.Equal(`{"interfaces":{}}`))
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    Annotation
		wantErr string
	}{
		{name: "design example", in: designExample, want: Annotation{Interfaces: map[string]Interface{"fp-db-link": {
			MTU: 9000, Queues: 4, RxQueueSize: 1024, TxQueueSize: 256,
			Offloads: Offloads{TSO: "On", GSO: "On", GRO: "On", TXChecksum: "On", RXChecksum: "On"},
		}}}},
		{name: "unknown keys are ignored", in: `{"interfaces":{"fp-a":{"mtu":9000,"future":1}},"version":2}`,
			want: Annotation{Interfaces: map[string]Interface{"fp-a": {MTU: 9000}}}},
		{name: "partial", in: `{"interfaces":{"fp-a":{"offloads":{"tso":"Off"}}}}`,
			want: Annotation{Interfaces: map[string]Interface{"fp-a": {Offloads: Offloads{TSO: "Off"}}}}},
		{name: "not json", in: `interfaces`, wantErr: "failed to parse tuning annotation"},
		{name: "wrong type", in: `{"interfaces":{"fp-a":{"mtu":"9000"}}}`, wantErr: "failed to parse tuning annotation"},
		{name: "mtu too small", in: `{"interfaces":{"fp-a":{"mtu":1279}}}`, wantErr: `interfaces["fp-a"].mtu 1279 is invalid: must be 1280-65535`},
		{name: "mtu too large", in: `{"interfaces":{"fp-a":{"mtu":65536}}}`, wantErr: `interfaces["fp-a"].mtu 65536 is invalid`},
		{name: "queues", in: `{"interfaces":{"fp-a":{"queues":257}}}`, wantErr: `interfaces["fp-a"].queues 257 is invalid: must be 1-256`},
		{name: "rx ring", in: `{"interfaces":{"fp-a":{"rxQueueSize":300}}}`, wantErr: `interfaces["fp-a"].rxQueueSize 300 is invalid: must be one of 256, 512, 1024`},
		{name: "tx ring", in: `{"interfaces":{"fp-a":{"txQueueSize":2048}}}`, wantErr: `interfaces["fp-a"].txQueueSize 2048 is invalid`},
		{name: "offload", in: `{"interfaces":{"fp-a":{"offloads":{"gso":"on"}}}}`, wantErr: `interfaces["fp-a"].offloads.gso "on" is invalid: must be On or Off`},
		{name: "empty name", in: `{"interfaces":{"":{}}}`, wantErr: `interfaces has an empty network name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			got, err := Parse(tc.in)
			if tc.wantErr != "" {
				g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(got).To(gomega.Equal(tc.want))
		})
	}
}

func TestMarshalRejectsInvalid(t *testing.T) {
	g := gomega.NewWithT(t)
	_, err := Annotation{Interfaces: map[string]Interface{"fp-a": {RxQueueSize: 128}}}.Marshal()
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`failed to marshal tuning annotation: interfaces["fp-a"].rxQueueSize 128 is invalid`)))
}

func TestInterfaceDiff(t *testing.T) {
	want := Interface{MTU: 9000, Queues: 4, RxQueueSize: 1024, TxQueueSize: 256, Offloads: Offloads{TSO: v1alpha1.OffloadOn, GRO: v1alpha1.OffloadOn}}
	if d := want.Diff(want); d != "" {
		t.Errorf("Diff of equal interfaces = %q, want \"\"", d)
	}
	running := want
	running.Queues, running.Offloads.GRO = 2, v1alpha1.OffloadOff
	if d, w := want.Diff(running), "queues 4, running 2; gro On, running Off"; d != w {
		t.Errorf("Diff = %q, want %q", d, w)
	}
}

// A VMI started before rxChecksum existed carries the four-offload
// annotation; the template an upgraded operator writes adds rxChecksum On.
// The VM must not become RestartRequired.
func TestInterfaceDiffRecordWithoutRXChecksum(t *testing.T) {
	g := gomega.NewWithT(t)
	old, err := Parse(`{"interfaces":{"fp-db-link":{"mtu":9000,"queues":4,"rxQueueSize":1024,"txQueueSize":256,"offloads":{"tso":"On","gso":"On","gro":"On","txChecksum":"On"}}}}`)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	running := old.Interfaces["fp-db-link"]
	g.Expect(running.Offloads.RXChecksum).To(gomega.BeEmpty())
	spec := v1alpha1.DefaultAttachmentSpec(v1alpha1.FastPathAttachmentSpec{
		Network: &v1alpha1.NetworkSpec{Queues: ptr(int32(4)), IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}},
	})
	want := FromNetworkSpec(*spec.Network)
	g.Expect(want.Offloads.RXChecksum).To(gomega.Equal(v1alpha1.OffloadOn))
	g.Expect(want.Diff(running)).To(gomega.BeEmpty())
	// Asking for it Off is a difference a restart applies.
	want.Offloads.RXChecksum = v1alpha1.OffloadOff
	g.Expect(want.Diff(running)).To(gomega.Equal("rxChecksum Off, running On"))
}

// A VMI started before an offload existed carries an annotation without its
// key; the template now sets it On, the default. That is no difference (no
// RestartRequired after an upgrade), while an explicit Off still is one.
func TestInterfaceDiffUnsetOffloadIsOn(t *testing.T) {
	g := gomega.NewWithT(t)
	spec := v1alpha1.DefaultAttachmentSpec(v1alpha1.FastPathAttachmentSpec{
		Network: &v1alpha1.NetworkSpec{Queues: ptr(int32(4)), IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}},
	})
	want := FromNetworkSpec(*spec.Network)
	g.Expect(want.Offloads).To(gomega.Equal(v1alpha1.AllOffloads(v1alpha1.OffloadOn)))
	for _, row := range wellknown.Offloads {
		old := want
		*old.Offloads.Offload(row.Name) = ""
		g.Expect(want.Diff(old)).To(gomega.BeEmpty(), "running annotation without %s", row.Name)
		g.Expect(old.Diff(want)).To(gomega.BeEmpty(), "template without %s", row.Name)
		*old.Offloads.Offload(row.Name) = v1alpha1.OffloadOff
		g.Expect(want.Diff(old)).To(gomega.Equal(row.Name + " On, running Off"))
	}
}
