package nodeagent

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// recordingDHCP is a DHCPResponders that records the bridges it is asked
// to serve and fails those in fail.
type recordingDHCP struct {
	bridges []string
	fail    map[string]error
}

func (d *recordingDHCP) Sync(bridges []string) map[string]error {
	d.bridges = bridges
	out := map[string]error{}
	for _, b := range bridges {
		if err := d.fail[b]; err != nil {
			out[b] = err
		}
	}
	return out
}

// TestDHCPRunsOnReadyLinuxBridges: the agent answers DHCP on its ready
// LinuxBridge bridges only, and a responder that does not run is that
// bridge's error.
func TestDHCPRunsOnReadyLinuxBridges(t *testing.T) {
	g := NewWithT(t)
	d := &recordingDHCP{fail: map[string]error{"fp1": errors.New("no socket")}}
	r := &Reconciler{DHCP: d}
	s := &scope{}
	s.bridges = []fastpathv1alpha1.BridgeStatus{
		{Name: "fp0", Datapath: fastpathv1alpha1.DatapathLinuxBridge, Ready: true},
		{Name: "fp1", Datapath: fastpathv1alpha1.DatapathLinuxBridge, Ready: true},
		{Name: "fp2", Datapath: fastpathv1alpha1.DatapathLinuxBridge, Ready: false},
		{Name: "fp3", Datapath: fastpathv1alpha1.DatapathOVS, Ready: true},
		{Name: "fp4", Datapath: fastpathv1alpha1.DatapathMacvtap, Ready: true},
	}
	r.syncDHCP(context.Background(), s)
	g.Expect(d.bridges).To(Equal([]string{"fp0", "fp1"}))
	g.Expect(s.bridges[0].Message).To(BeEmpty())
	g.Expect(s.bridges[1].Message).To(Equal("DHCP responder on bridge fp1: no socket"))
	g.Expect(s.bridgeErrs).To(HaveLen(1))

	// Without a manager, nothing runs and nothing fails.
	s = &scope{}
	s.bridges = []fastpathv1alpha1.BridgeStatus{{Name: "fp0", Datapath: fastpathv1alpha1.DatapathLinuxBridge, Ready: true}}
	(&Reconciler{}).syncDHCP(context.Background(), s)
	g.Expect(s.bridgeErrs).To(BeEmpty())
}
