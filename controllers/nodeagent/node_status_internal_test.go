package nodeagent

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/node/probe"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

func allGood() fastpathv1alpha1.NodeCapabilities {
	return fastpathv1alpha1.NodeCapabilities{VhostNet: true, VhostVSOCK: true, Tun: true,
		OVS: &fastpathv1alpha1.OVSInfo{Reachable: true}}
}

var oneBridge = []DesiredBridge{{Name: "fp0", Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 9000}}

var oneRoute = []relay.Route{{Attachment: types.NamespacedName{Namespace: "a", Name: "b"}, Service: "db", ListenPort: 20000, TargetCID: 5, TargetPort: 1}}

type wantCond struct {
	status  metav1.ConditionStatus
	reason  string
	message string // substring
}

func TestConditions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		obs      observed
		emulated bool
		bridges  wantCond
		relay    wantCond
		ready    wantCond
	}{
		{
			name:    "nothing wanted",
			obs:     observed{caps: allGood()},
			bridges: wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoBridgesWanted, "no FastPathNetwork asks for a bridge"},
			relay:   wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoRoutes, "no vsock service targets a VM on this node"},
			ready:   wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonReady, "node ready"},
		},
		{
			name:    "bridges and routes ready, no vhost-net: a warning only",
			obs:     observed{caps: fastpathv1alpha1.NodeCapabilities{VhostVSOCK: true, Tun: true}, desired: oneBridge, routes: oneRoute},
			bridges: wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonBridgesReady, "bridges ready: fp0 (LinuxBridge, MTU 9000)"},
			relay:   wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonRelayReady, "relay serves 1 routes on ports 20000"},
			ready:   wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonReady, "node ready; warning: " + probe.MsgVhostNetMissing},
		},
		{
			name: "OVS unreachable",
			obs: observed{caps: fastpathv1alpha1.NodeCapabilities{VhostNet: true, VhostVSOCK: true, Tun: true, OVS: &fastpathv1alpha1.OVSInfo{Message: "OVSDB at x does not answer"}},
				desired: oneBridge, bridgeErrs: []error{fmt.Errorf("failed to ensure OVS bridge fp0: %w", bridge.ErrOVSUnreachable)}},
			bridges: wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonOVSUnreachable, "OVSDB at x does not answer; failed to ensure OVS bridge fp0"},
			relay:   wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoRoutes, ""},
			ready:   wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonNotReady, "BridgesReady is False (OVSUnreachable)"},
		},
		{
			name:    "bridge failed",
			obs:     observed{caps: allGood(), desired: oneBridge, bridgeErrs: []error{errors.New("failed to set MTU 9000 on Linux bridge fp0: invalid argument")}},
			bridges: wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonBridgeFailed, "failed to set MTU 9000 on Linux bridge fp0"},
			relay:   wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoRoutes, ""},
			ready:   wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonNotReady, "BridgesReady is False (BridgeFailed)"},
		},
		{
			name: "conflict wins over other failures",
			obs: observed{caps: allGood(), bridgeErrs: []error{errors.New("boom")},
				conflicts: []BridgeConflict{{Name: "fp1", Networks: []string{"n1", "n2"}, ByNetwork: map[string][]string{"n1": {"a/x"}, "n2": {"a/y"}}}}},
			bridges: wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonBridgeConflict, "bridge fp1 is named by FastPathNetworks n1, n2"},
			relay:   wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoRoutes, ""},
			ready:   wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonNotReady, "BridgeConflict"},
		},
		{
			name:    "routes without vhost-vsock on the real transport",
			obs:     observed{caps: fastpathv1alpha1.NodeCapabilities{VhostNet: true, Tun: true}, routes: oneRoute},
			bridges: wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoBridgesWanted, ""},
			relay:   wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonVhostVSOCKMissing, probe.MsgVhostVSOCKMissing},
			ready:   wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonNotReady, "VSOCKRelayReady is False (VhostVSOCKMissing)"},
		},
		{
			name:     "routes without vhost-vsock on the emulated transport",
			obs:      observed{caps: fastpathv1alpha1.NodeCapabilities{VhostNet: true, Tun: true}, routes: oneRoute},
			emulated: true,
			bridges:  wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoBridgesWanted, ""},
			relay:    wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonRelayReady, "(" + EmulatedTransportLabel + ": vsock emulated over UNIX sockets under /run/fp (this end is CID 2))"},
			ready:    wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonReady, ""},
		},
		{
			name:    "invalid route and relay failure",
			obs:     observed{caps: allGood(), routes: oneRoute, routeProbs: []string{"attachment a/b service x: relayPort -1 is not a uint32"}, relayErr: errors.New("failed to open listener")},
			bridges: wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoBridgesWanted, ""},
			relay:   wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonRelayFailed, "relayPort -1 is not a uint32; failed to open listener"},
			ready:   wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonNotReady, "VSOCKRelayReady is False (RelayFailed)"},
		},
		{
			name:    "CNI install failed; sysctls failed (a warning only)",
			obs:     observed{caps: allGood(), cniErr: errors.New("no such file"), sysctlErr: errors.New("read-only file system")},
			bridges: wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoBridgesWanted, ""},
			relay:   wantCond{metav1.ConditionTrue, fastpathv1alpha1.ReasonNoRoutes, ""},
			ready:   wantCond{metav1.ConditionFalse, fastpathv1alpha1.ReasonNotReady, "CNI binary not installed: no such file; sysctl tuning failed: read-only file system"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Reconciler{}
			if tc.emulated {
				r.RelayTransport = vsock.NewUnixTransport("/run/fp", vsock.HostCID)
			}
			fpn := &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			st := r.computeStatus(fpn, &tc.obs)
			for typ, want := range map[string]wantCond{
				fastpathv1alpha1.BridgesReadyCondition:    tc.bridges,
				fastpathv1alpha1.VSOCKRelayReadyCondition: tc.relay,
				fastpathv1alpha1.ReadyCondition:           tc.ready,
			} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				g.Expect(c).NotTo(BeNil(), typ)
				g.Expect(c.Status).To(Equal(want.status), "%s: %s", typ, c.Message)
				g.Expect(c.Reason).To(Equal(want.reason), "%s: %s", typ, c.Message)
				g.Expect(c.Message).To(ContainSubstring(want.message), typ)
				g.Expect(c.ObservedGeneration).To(Equal(int64(3)))
			}
		})
	}
}

func TestComputeStatusKeepsTransitionTimesAndSortsBridges(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{AgentVersion: "v1"}
	obs := &observed{caps: allGood(), cni: "/opt/cni/bin/fastpath sha256:ab",
		bridges: []fastpathv1alpha1.BridgeStatus{{Name: "b"}, {Name: "a"}}}
	old := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	fpn := &fastpathv1alpha1.FastPathNode{}
	fpn.Status.Conditions = []metav1.Condition{{Type: fastpathv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: old}}

	st := r.computeStatus(fpn, obs)
	g.Expect(meta.FindStatusCondition(st.Conditions, fastpathv1alpha1.ReadyCondition).LastTransitionTime).To(Equal(old))
	g.Expect(st.Bridges[0].Name).To(Equal("a"))
	g.Expect(st.CNIBinary).To(Equal("/opt/cni/bin/fastpath sha256:ab"))
	g.Expect(st.AgentVersion).To(Equal("v1"))
	g.Expect(fpn.Status.Conditions).To(HaveLen(1), "the object's conditions are not modified in place")

	obs.cniErr = errors.New("gone")
	st = r.computeStatus(fpn, obs)
	g.Expect(meta.FindStatusCondition(st.Conditions, fastpathv1alpha1.ReadyCondition).LastTransitionTime).NotTo(Equal(old))
}

func TestJoinMessagesBoundsTheList(t *testing.T) {
	g := NewWithT(t)
	g.Expect(joinMessages([]string{"a", "b"})).To(Equal("a; b"))
	g.Expect(joinLimited(strings.Split("1,2,3,4,5,6,7", ","), ", ")).To(Equal("1, 2, 3, 4, 5, and 2 more"))
}

func TestAttachmentChangedPredicate(t *testing.T) {
	g := NewWithT(t)
	p := attachmentChanged()
	base := &fastpathv1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	base.Status.VSOCKServices = []fastpathv1alpha1.VSOCKServiceStatus{{Name: "db", RelayPort: 20000, TargetCID: ptr.To[int64](5)}}

	conditionsOnly := base.DeepCopy()
	conditionsOnly.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: conditionsOnly})).To(BeFalse())

	spec := base.DeepCopy()
	spec.Generation = 2
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: spec})).To(BeTrue())

	routes := base.DeepCopy()
	routes.Status.VSOCKServices[0].AllowedCIDs = []int64{3}
	g.Expect(p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: routes})).To(BeTrue())

	g.Expect(p.Create(event.CreateEvent{Object: base})).To(BeTrue())
	g.Expect(p.Delete(event.DeleteEvent{Object: base})).To(BeTrue())
}
