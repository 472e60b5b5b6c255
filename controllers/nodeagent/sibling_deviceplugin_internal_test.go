package nodeagent

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

// recordingPlugins is a DevicePluginManager that records what it is asked
// to run and fails the resources in fail.
type recordingPlugins struct {
	wanted []string
	// preStart: by resource name, whether it has a PreStart (the check).
	preStart map[string]bool
	fail     map[string]error
}

func (p *recordingPlugins) Sync(want []deviceplugin.Want) map[string]error {
	p.wanted, p.preStart = nil, map[string]bool{}
	out := map[string]error{}
	for _, w := range want {
		p.wanted = append(p.wanted, w.Resource.Name)
		p.preStart[w.Resource.Name] = w.Resource.PreStart != nil
		out[w.Resource.Name] = p.fail[w.Resource.Name]
	}
	return out
}

type noSiblings struct{}

func (noSiblings) Sync([]backend.Group) error { return nil }
func (noSiblings) Status() []backend.Status   { return nil }

// TestSiblingDevicePluginRunsWithTheBackendAndReportsInSiblingBackendsReady:
// the sibling resource is offered beside the macvtap ones only when the
// agent runs the backend; a registration failure shows in
// SiblingBackendsReady (reason SiblingDevicePluginFailed), not on a bridge.
func TestSiblingDevicePluginRunsWithTheBackendAndReportsInSiblingBackendsReady(t *testing.T) {
	g := NewWithT(t)
	res, err := (&deviceplugin.SiblingMounts{}).Resource()
	g.Expect(err).NotTo(HaveOccurred())
	mac := fastpathv1alpha1.BridgeStatus{Name: "fp0", Datapath: fastpathv1alpha1.DatapathMacvtap, Ready: true}

	plugins := &recordingPlugins{fail: map[string]error{fastpathv1alpha1.SiblingResourceName: errors.New("kubelet said no")}}
	r := &Reconciler{DevicePlugins: plugins, SiblingDevicePlugin: &res, Siblings: noSiblings{}, SiblingVersion: "0.3.0"}
	s := &scope{}
	s.bridges = []fastpathv1alpha1.BridgeStatus{mac}
	r.syncDevicePlugins(context.Background(), s)
	g.Expect(plugins.wanted).To(ConsistOf("macvtap.fastpath.io/fp0", "vsock.fastpath.io/sibling"))
	g.Expect(s.bridges[0].Message).To(BeEmpty())
	g.Expect(s.bridgeErrs).To(BeEmpty())
	g.Expect(s.observed.siblingPluginErr).To(MatchError(ContainSubstring("device plugin vsock.fastpath.io/sibling: kubelet said no")))
	var conds []metav1.Condition
	setSiblingBackendsReadyCondition(&conds, &s.observed, 1, true)
	c := meta.FindStatusCondition(conds, fastpathv1alpha1.SiblingBackendsReadyCondition)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(fastpathv1alpha1.ReasonSiblingDevicePluginFailed))

	// Without the backend, no sibling resource.
	r.Siblings = nil
	s = &scope{}
	s.bridges = []fastpathv1alpha1.BridgeStatus{mac}
	r.syncDevicePlugins(context.Background(), s)
	g.Expect(plugins.wanted).To(ConsistOf("macvtap.fastpath.io/fp0"))
}

// TestMacvtapDevicePluginChecksTheLauncherWhenTheAgentCan: with
// MacvtapLaunchers (the agent sets it whenever it serves device plugins)
// every macvtap resource is served with the PreStartContainer check.
func TestMacvtapDevicePluginChecksTheLauncherWhenTheAgentCan(t *testing.T) {
	g := NewWithT(t)
	plugins := &recordingPlugins{}
	r := &Reconciler{DevicePlugins: plugins, MacvtapLaunchers: &deviceplugin.MacvtapLaunchers{NodeName: "node-1"}}
	s := &scope{}
	s.bridges = []fastpathv1alpha1.BridgeStatus{
		{Name: "fp0", Datapath: fastpathv1alpha1.DatapathMacvtap, Ready: true},
		{Name: "fp1", Datapath: fastpathv1alpha1.DatapathMacvtap, Ready: true},
		{Name: "br0", Datapath: fastpathv1alpha1.DatapathLinuxBridge, Ready: true}}
	r.syncDevicePlugins(context.Background(), s)
	g.Expect(plugins.preStart).To(Equal(map[string]bool{"macvtap.fastpath.io/fp0": true, "macvtap.fastpath.io/fp1": true}))
}
