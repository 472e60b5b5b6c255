package testutil

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/datapath/ovsrun"
)

func TestStartOVSAndAddOVSBridge(t *testing.T) {
	RequireRoot(t)
	g := NewWithT(t)
	socket := StartOVS(t)
	g.Expect(socket).To(Equal(OVSSocket))
	g.Expect(ovsrun.Answers()).To(BeTrue())
	g.Expect(ovsrun.VswitchdRuns()).To(BeTrue())
	// A second Start in the same process shares the first.
	g.Expect(StartOVS(t)).To(Equal(OVSSocket))

	name := UniqueName("fpovt")
	t.Run("bridge", func(t *testing.T) {
		g := NewWithT(t)
		AddOVSBridge(t, socket, name, 9000)
		out, err := exec.Command("ovs-vsctl", "--db="+socket, "get", "Bridge", name, "datapath_type").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		g.Expect(strings.TrimSpace(string(out))).To(Equal("netdev"))
	})
	out, err := exec.Command("ovs-vsctl", "--db="+socket, "br-exists", name).CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "bridge %s must be gone after its cleanup: %s", name, out)
}
