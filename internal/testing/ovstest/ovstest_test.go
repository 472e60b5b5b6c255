package ovstest

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/testing/ovsrun"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

func TestStartAndAddBridge(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	socket := Start(t)
	g.Expect(socket).To(Equal(Socket))
	g.Expect(ovsrun.Answers()).To(BeTrue())
	g.Expect(ovsrun.VswitchdRuns()).To(BeTrue())
	// A second Start in the same process shares the first.
	g.Expect(Start(t)).To(Equal(Socket))

	name := testutil.UniqueName("fpovt")
	t.Run("bridge", func(t *testing.T) {
		g := NewWithT(t)
		AddBridge(t, socket, name, 9000)
		out, err := exec.Command("ovs-vsctl", "--db="+socket, "get", "Bridge", name, "datapath_type").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		g.Expect(strings.TrimSpace(string(out))).To(Equal("netdev"))
	})
	out, err := exec.Command("ovs-vsctl", "--db="+socket, "br-exists", name).CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "bridge %s must be gone after its cleanup: %s", name, out)
}
