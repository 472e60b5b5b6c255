package nodeagent_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

func att(ns, name string, network *fastpathv1alpha1.NetworkSpec, svcs ...fastpathv1alpha1.VSOCKServiceStatus) fastpathv1alpha1.FastPathAttachment {
	return fastpathv1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fastpathv1alpha1.FastPathAttachmentSpec{Network: network},
		Status:     fastpathv1alpha1.FastPathAttachmentStatus{VSOCKServices: svcs},
	}
}

func onNetwork(a fastpathv1alpha1.FastPathAttachment, net string) fastpathv1alpha1.FastPathAttachment {
	a.Spec.Network = &fastpathv1alpha1.NetworkSpec{IPAM: fastpathv1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}
	if net != "" {
		a.Spec.NetworkRef = &fastpathv1alpha1.NetworkReference{Name: net}
	}
	return a
}

func fpnet(name string, dp fastpathv1alpha1.Datapath, br string, maxMTU int32, isDefault bool) fastpathv1alpha1.FastPathNetwork {
	n := fastpathv1alpha1.FastPathNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fastpathv1alpha1.FastPathNetworkSpec{Datapath: dp, Bridge: br}}
	if maxMTU > 0 {
		n.Spec.MTU = &fastpathv1alpha1.MTURange{Max: ptr.To(maxMTU)}
	}
	if isDefault {
		n.Annotations = map[string]string{fastpathv1alpha1.DefaultNetworkAnnotation: "true"}
	}
	return n
}

func TestDesiredBridges(t *testing.T) {
	lb, ovs := fastpathv1alpha1.DatapathLinuxBridge, fastpathv1alpha1.DatapathOVS
	for _, tc := range []struct {
		name      string
		nets      []fastpathv1alpha1.FastPathNetwork
		atts      []fastpathv1alpha1.FastPathAttachment
		bridges   []agent.DesiredBridge
		conflicts []string // names
	}{
		{name: "no network", atts: []fastpathv1alpha1.FastPathAttachment{onNetwork(att("a", "x", nil), "")}},
		{
			name:    "a network's bridge is wanted with no attachment, defaulted",
			nets:    []fastpathv1alpha1.FastPathNetwork{fpnet("n", "", "fastpath0", 0, false)},
			bridges: []agent.DesiredBridge{{Name: "fastpath0", Datapath: lb, MTU: 9000, Network: "n"}},
		},
		{
			name: "attachments by reference and by the default network; the MTU is the network's max",
			nets: []fastpathv1alpha1.FastPathNetwork{fpnet("def", lb, "br0", 1500, true), fpnet("big", ovs, "br1", 65000, false)},
			atts: []fastpathv1alpha1.FastPathAttachment{
				onNetwork(att("b", "y", nil), "big"), onNetwork(att("a", "x", nil), "big"), onNetwork(att("a", "z", nil), ""),
				att("a", "vsock-only", nil),
			},
			bridges: []agent.DesiredBridge{
				{Name: "br0", Datapath: lb, MTU: 1500, Network: "def", Attachments: []string{"a/z"}},
				{Name: "br1", Datapath: ovs, MTU: 65000, Network: "big", Attachments: []string{"a/x", "b/y"}},
			},
		},
		{
			name: "two networks on one bridge, even with one datapath: a conflict, not a bridge",
			nets: []fastpathv1alpha1.FastPathNetwork{fpnet("t1", lb, "fp0", 0, false), fpnet("t2", lb, "fp0", 0, false), fpnet("t3", lb, "fp1", 0, false)},
			atts: []fastpathv1alpha1.FastPathAttachment{onNetwork(att("a", "x", nil), "t1"), onNetwork(att("b", "y", nil), "t2"), onNetwork(att("c", "w", nil), "t3")},
			bridges: []agent.DesiredBridge{
				{Name: "fp1", Datapath: lb, MTU: 9000, Network: "t3", Attachments: []string{"c/w"}},
			},
			conflicts: []string{"fp0"},
		},
		{
			name:    "two default networks: attachments without a reference are on neither",
			nets:    []fastpathv1alpha1.FastPathNetwork{fpnet("d1", lb, "fp0", 0, true), fpnet("d2", lb, "fp1", 0, true)},
			atts:    []fastpathv1alpha1.FastPathAttachment{onNetwork(att("a", "x", nil), "")},
			bridges: []agent.DesiredBridge{{Name: "fp0", Datapath: lb, MTU: 9000, Network: "d1"}, {Name: "fp1", Datapath: lb, MTU: 9000, Network: "d2"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			bridges, conflicts := agent.DesiredBridges(tc.nets, tc.atts)
			g.Expect(bridges).To(Equal(tc.bridges))
			var names []string
			for _, c := range conflicts {
				names = append(names, c.Name)
			}
			g.Expect(names).To(Equal(tc.conflicts))
		})
	}
}

func TestBridgeConflictNamesBothNetworksAndTheirAttachments(t *testing.T) {
	g := NewWithT(t)
	_, conflicts := agent.DesiredBridges(
		[]fastpathv1alpha1.FastPathNetwork{fpnet("web", fastpathv1alpha1.DatapathOVS, "fp0", 0, false), fpnet("apps", fastpathv1alpha1.DatapathLinuxBridge, "fp0", 0, false)},
		[]fastpathv1alpha1.FastPathAttachment{onNetwork(att("apps", "b", nil), "apps"), onNetwork(att("apps", "a", nil), "apps"), onNetwork(att("web", "c", nil), "web")})
	g.Expect(conflicts).To(HaveLen(1))
	g.Expect(conflicts[0].Attachments()).To(Equal([]string{"apps/a", "apps/b", "web/c"}))
	g.Expect(conflicts[0].Message()).To(Equal("bridge fp0 is named by FastPathNetworks apps, web: left unchanged until only one names it " +
		"(two networks on one bridge would join their tenants in one L2 segment)"))
}

func svc(name, node string, relayPort, port int64, target *int64, allowed ...int64) fastpathv1alpha1.VSOCKServiceStatus {
	return fastpathv1alpha1.VSOCKServiceStatus{Name: name, VM: "vm-" + name, Port: port, RelayPort: relayPort, Node: node, TargetCID: target, AllowedCIDs: allowed}
}

func TestRelayRoutes(t *testing.T) {
	g := NewWithT(t)
	atts := []fastpathv1alpha1.FastPathAttachment{
		att("apps", "db", nil,
			svc("pg", "n1", 20001, 5432, ptr.To[int64](5), 4, 3, 4),
			svc("elsewhere", "n2", 20002, 5432, ptr.To[int64](6), 3),
			svc("no-port-yet", "n1", 0, 5432, ptr.To[int64](7), 3),
			svc("no-cid-yet", "n1", 20003, 5432, nil, 3),
			svc("broken", "n1", 1<<33, 5432, ptr.To[int64](-1), 3),
		),
		att("web", "cache", nil, svc("redis", "n1", 20000, 6379, ptr.To[int64](8), 9)),
	}
	routes, problems := agent.RelayRoutes(atts, "n1")
	g.Expect(routes).To(Equal([]relay.Route{
		{Attachment: types.NamespacedName{Namespace: "web", Name: "cache"}, Service: "redis", ListenPort: 20000, TargetCID: 8, TargetPort: 6379, AllowedCIDs: []uint32{9}},
		{Attachment: types.NamespacedName{Namespace: "apps", Name: "db"}, Service: "pg", ListenPort: 20001, TargetCID: 5, TargetPort: 5432, AllowedCIDs: []uint32{3, 4}},
	}))
	g.Expect(problems).To(Equal([]string{"attachment apps/db service broken: relayPort 8589934592 is not a uint32, targetCID -1 is not a uint32"}))
}
