package domainhook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// siblingVMI is the VMI fixture with the vsock-mode annotation set to mode.
func siblingVMI(t *testing.T, mode string) []byte {
	t.Helper()
	var vmi kubevirtv1.VirtualMachineInstance
	if err := json.Unmarshal(readFixture(t, fixtureVMI), &vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Annotations[v1alpha1.VSOCKModeAnnotation] = mode
	b, err := json.Marshal(&vmi)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSiblingReplacesTheKernelVsockAndValidates: every fixture, after the
// tuning and the Sibling edit, has no <vsock>, memfd shared memory and the
// vhost-user-vsock-pci device on the VM's socket, and libvirt's schema
// (virt-xml-validate) accepts it; a second pass changes nothing.
func TestSiblingReplacesTheKernelVsockAndValidates(t *testing.T) {
	t.Setenv(SiblingSocketDirEnv, "")
	for _, fixture := range []string{fixtureKubeVirt, fixtureExtras, fixtureVirsh} {
		t.Run(fixture, func(t *testing.T) {
			g := gomega.NewWithT(t)
			vmiJSON := siblingVMI(t, "Sibling")
			res, err := OnDefineDomain(vmiJSON, readFixture(t, fixture))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			var vmi kubevirtv1.VirtualMachineInstance
			g.Expect(json.Unmarshal(vmiJSON, &vmi)).To(gomega.Succeed())
			socket := v1alpha1.SiblingSocketPath(vmi.Namespace, vmi.Name)
			out := string(res.Domain)
			g.Expect(out).NotTo(gomega.ContainSubstring("<vsock"))
			g.Expect(out).To(gomega.ContainSubstring("<memoryBacking>"))
			doc := parseDoc(t, res.Domain)
			g.Expect(doc.FindElement("/domain/memoryBacking/source").SelectAttrValue("type", "")).To(gomega.Equal("memfd"))
			g.Expect(doc.FindElement("/domain/memoryBacking/access").SelectAttrValue("mode", "")).To(gomega.Equal("shared"))
			var args []string
			for _, a := range doc.FindElements("/domain/qemu:commandline/qemu:arg") {
				args = append(args, a.SelectAttrValue("value", ""))
			}
			g.Expect(strings.Join(args, " ")).To(gomega.MatchRegexp(
				"-chardev socket,id=fpvsock0,path=" + socket + " -device vhost-user-vsock-pci,chardev=fpvsock0(,bus=pcie.0,addr=0x1[0-8])?$"))
			g.Expect(res.Changes).To(gomega.ContainElement(gomega.HaveField("Element", "qemu:commandline")))
			vout, err := virtXMLValidate(t, "sibling-"+fixture, res.Domain)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "%s\n%s", vout, out)
			g.Expect(vout).To(gomega.ContainSubstring("validates"))

			again, err := ApplySibling(res.Domain, socket)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(again.Changed()).To(gomega.BeFalse())
			g.Expect(again.Domain).To(gomega.Equal(res.Domain))
		})
	}
}

func TestSiblingSocketDirFromTheEnvironment(t *testing.T) {
	t.Setenv(SiblingSocketDirEnv, "/run/fp-test")
	g := gomega.NewWithT(t)
	g.Expect(SiblingSocket("ns", "vm")).To(gomega.HavePrefix("/run/fp-test/"))
	g.Expect(SiblingSocket("ns", "vm")).To(gomega.HaveSuffix(".vhost"))
	g.Expect(SiblingSocket("ns", "vm")).NotTo(gomega.Equal(SiblingSocket("ns", "vm2")))
}

func TestSiblingErrorsNameTheProblem(t *testing.T) {
	g := gomega.NewWithT(t)
	_, err := OnDefineDomain(siblingVMI(t, "Direct"), readFixture(t, fixtureKubeVirt))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`fastpath.io/vsock-mode of VMI`)))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`"Direct" is invalid: must be Relay or Sibling`)))
	_, err = ApplySibling(readFixture(t, fixtureKubeVirt), "relative.vhost")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("must be an absolute path")))
	huge := strings.Replace(string(readFixture(t, fixtureKubeVirt)), "</memory>", "</memory>\n\t<memoryBacking><hugepages></hugepages><source type=\"file\"></source></memoryBacking>", 1)
	_, err = ApplySibling([]byte(huge), "/run/x.vhost")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`memoryBacking source type "file", vhost-user needs memfd`)))

	res, err := OnDefineDomain(siblingVMI(t, "Relay"), readFixture(t, fixtureKubeVirt))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(string(res.Domain)).To(gomega.ContainSubstring("<vsock"), "mode Relay keeps KubeVirt's kernel vsock")
}
