package domainhook

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

// virtXMLValidate runs libvirt's `virt-xml-validate <file> domain` (Debian
// libvirt-clients; it calls xmllint from libxml2-utils) on doc and returns its
// exit error and output.
func virtXMLValidate(t *testing.T, name string, doc []byte) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("virt-xml-validate"); err != nil {
		t.Fatalf("virt-xml-validate is needed (Debian packages libvirt-clients and libxml2-utils): %v", err)
	}
	if _, err := exec.LookPath("xmllint"); err != nil {
		t.Fatalf("xmllint is needed by virt-xml-validate (Debian package libxml2-utils): %v", err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatalf("failed to write %s: %v", path, err)
	}
	out, err := exec.Command("virt-xml-validate", path, "domain").CombinedOutput()
	return string(out), err
}

func TestFixturesAndOutputValidateAgainstLibvirtSchema(t *testing.T) {
	offloadsOff := domaintuning.Offloads{TSO: "Off", GSO: "Off", GRO: "Off", TXChecksum: "Off"}
	for _, tc := range []struct {
		fixture string
		tuning  domaintuning.Annotation
	}{
		{fixtureKubeVirt, annotation(map[string]domaintuning.Interface{"fp-db-link": designTuning()})},
		{fixtureKubeVirt, annotation(map[string]domaintuning.Interface{"fp-db-link": {Queues: 1, RxQueueSize: 256, Offloads: offloadsOff}, "default": {MTU: 1300}})},
		{fixtureExtras, annotation(map[string]domaintuning.Interface{"fp-db-link": designTuning(), "fp-cache-link": {MTU: 65000, RxQueueSize: 512}})},
		{fixtureVirsh, annotation(map[string]domaintuning.Interface{"fp-db-link": designTuning()})},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			g := gomega.NewWithT(t)
			in := readFixture(t, tc.fixture)
			out, err := virtXMLValidate(t, "in-"+tc.fixture, in)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "input fixture: %s", out)
			g.Expect(out).To(gomega.ContainSubstring("validates"))

			res, err := Apply(in, tc.tuning)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(res.Changed()).To(gomega.BeTrue())
			out, err = virtXMLValidate(t, "out-"+tc.fixture, res.Domain)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "hook output: %s\n%s", out, res.Domain)
			g.Expect(out).To(gomega.ContainSubstring("validates"))
		})
	}
}

// TestLibvirtSchemaRejectsBrokenDriver shows the validator above can fail: a
// non-numeric ring size and an offload value other than on/off are rejected.
func TestLibvirtSchemaRejectsBrokenDriver(t *testing.T) {
	in := string(readFixture(t, fixtureKubeVirt))
	anchor := "<alias name=\"ua-fp-db-link\"></alias>\n"
	for _, driver := range []string{
		`<driver name="vhost" rx_queue_size="big"></driver>`,
		`<driver name="vhost"><host tso4="yes"></host></driver>`,
		`<driver name="vhost"><guest gso="on"></guest></driver>`,
	} {
		t.Run(driver, func(t *testing.T) {
			g := gomega.NewWithT(t)
			broken := strings.Replace(in, anchor, anchor+"\t\t\t"+driver+"\n", 1)
			g.Expect(broken).NotTo(gomega.Equal(in))
			out, err := virtXMLValidate(t, "broken.xml", []byte(broken))
			g.Expect(err).To(gomega.HaveOccurred(), "virt-xml-validate accepted %s: %s", driver, out)
			g.Expect(out).To(gomega.ContainSubstring("fails to validate"))
		})
	}
}
