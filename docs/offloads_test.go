package docs

import (
	"os"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// The offload table of domain-hook.md ("| tuning | libvirt attributes | ...")
// has one row per row of wellknown.Offloads, and no other: a new offload
// without its documentation, or a removed one still documented, fails.
func TestDomainHookDocsListEveryOffload(t *testing.T) {
	g := NewWithT(t)
	b, err := os.ReadFile("domain-hook.md")
	g.Expect(err).NotTo(HaveOccurred())
	rows := regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\| `(?:host|guest) ").FindAllStringSubmatch(string(b), -1)
	var documented []string
	for _, r := range rows {
		documented = append(documented, r[1])
	}
	g.Expect(documented).To(ConsistOf(wellknown.OffloadNames()))
}
