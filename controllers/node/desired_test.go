package node_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	agent "github.com/fastpath-io/fastpath/controllers/node"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

func att(ns, name string, network *fastpathv1alpha1.NetworkSpec, svcs ...fastpathv1alpha1.VSOCKServiceStatus) fastpathv1alpha1.FastPathAttachment {
	return fastpathv1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       fastpathv1alpha1.FastPathAttachmentSpec{Network: network},
		Status:     fastpathv1alpha1.FastPathAttachmentStatus{VSOCKServices: svcs},
	}
}

func network(dp fastpathv1alpha1.Datapath, br string, mtu int32) *fastpathv1alpha1.NetworkSpec {
	n := &fastpathv1alpha1.NetworkSpec{Datapath: dp, Bridge: br, IPAM: fastpathv1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}
	if mtu > 0 {
		n.MTU = ptr.To(mtu)
	}
	return n
}

func TestDesiredBridges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		atts      []fastpathv1alpha1.FastPathAttachment
		bridges   []agent.DesiredBridge
		conflicts []string // names
	}{
		{name: "no network", atts: []fastpathv1alpha1.FastPathAttachment{att("a", "x", nil)}},
		{
			name: "defaults",
			atts: []fastpathv1alpha1.FastPathAttachment{att("a", "x", network("", "", 0))},
			bridges: []agent.DesiredBridge{{Name: "fastpath0", Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 9000,
				Attachments: []string{"a/x"}}},
		},
		{
			name: "largest MTU wins, one bridge per name",
			atts: []fastpathv1alpha1.FastPathAttachment{
				att("b", "y", network(fastpathv1alpha1.DatapathOVS, "br1", 9000)),
				att("a", "x", network(fastpathv1alpha1.DatapathOVS, "br1", 65000)),
				att("a", "z", network(fastpathv1alpha1.DatapathLinuxBridge, "br0", 1500)),
			},
			bridges: []agent.DesiredBridge{
				{Name: "br0", Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 1500, Attachments: []string{"a/z"}},
				{Name: "br1", Datapath: fastpathv1alpha1.DatapathOVS, MTU: 65000, Attachments: []string{"a/x", "b/y"}},
			},
		},
		{
			name: "one name, two datapaths: a conflict, not a bridge",
			atts: []fastpathv1alpha1.FastPathAttachment{
				att("a", "x", network(fastpathv1alpha1.DatapathLinuxBridge, "fp0", 9000)),
				att("b", "y", network(fastpathv1alpha1.DatapathOVS, "fp0", 9000)),
				att("c", "w", network(fastpathv1alpha1.DatapathLinuxBridge, "fp1", 9000)),
			},
			bridges: []agent.DesiredBridge{
				{Name: "fp1", Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 9000, Attachments: []string{"c/w"}},
			},
			conflicts: []string{"fp0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			bridges, conflicts := agent.DesiredBridges(tc.atts)
			g.Expect(bridges).To(Equal(tc.bridges))
			var names []string
			for _, c := range conflicts {
				names = append(names, c.Name)
			}
			g.Expect(names).To(Equal(tc.conflicts))
		})
	}
}

func TestBridgeConflictNamesBothAttachments(t *testing.T) {
	g := NewWithT(t)
	_, conflicts := agent.DesiredBridges([]fastpathv1alpha1.FastPathAttachment{
		att("apps", "b", network(fastpathv1alpha1.DatapathOVS, "fp0", 9000)),
		att("apps", "a", network(fastpathv1alpha1.DatapathLinuxBridge, "fp0", 9000)),
		att("web", "c", network(fastpathv1alpha1.DatapathOVS, "fp0", 1500)),
	})
	g.Expect(conflicts).To(HaveLen(1))
	g.Expect(conflicts[0].Attachments()).To(Equal([]string{"apps/a", "apps/b", "web/c"}))
	g.Expect(conflicts[0].Message()).To(Equal("bridge fp0 is wanted as LinuxBridge by apps/a and as OVS by apps/b, web/c: " +
		"left unchanged until they agree (change spec.network.bridge or spec.network.datapath of one of them)"))
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
