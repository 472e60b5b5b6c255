package v1alpha1

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

func TestCNINetworkName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(CNINetworkName("apps", "db-link")).To(Equal("fp-apps.db-link"))
	g.Expect(CNINetworkName("a", "db")).NotTo(Equal(CNINetworkName("b", "db")), "one name in two namespaces")
	g.Expect(CNINetworkName("a", "b-db")).NotTo(Equal(CNINetworkName("a-b", "db")), "a dash in the namespace does not make names meet")

	ns := strings.Repeat("n", 63)
	long := strings.Repeat("x", 253)
	got := CNINetworkName(ns, long)
	g.Expect(got).To(MatchRegexp(`^fp-n{63}-[0-9a-f]{32}$`))
	g.Expect(len(got)).To(BeNumerically("<=", wellknown.MaxNetworkNameLen))
	g.Expect(CNINetworkName(ns, long[1:])).NotTo(Equal(got))

	// The longest short form, and the first that is hashed.
	fits := strings.Repeat("y", wellknown.MaxNetworkNameLen-len("fp-"+ns+"."))
	g.Expect(CNINetworkName(ns, fits)).To(Equal("fp-" + ns + "." + fits))
	g.Expect(CNINetworkName(ns, fits+"y")).NotTo(ContainSubstring("."))
}
