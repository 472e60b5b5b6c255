package wellknown_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Every row of the offload table is complete: a unique name, the ethtool
// features the plugin and the agent switch, and at least one libvirt
// attribute for the domain hook.
func TestOffloadTableRowsAreComplete(t *testing.T) {
	g := NewWithT(t)
	seen := map[string]bool{}
	for _, row := range wellknown.Offloads {
		g.Expect(row.Name).NotTo(BeEmpty())
		g.Expect(seen).NotTo(HaveKey(row.Name), "offload %s twice", row.Name)
		seen[row.Name] = true
		g.Expect(row.Ethtool).NotTo(BeEmpty(), "offload %s switches no ethtool feature", row.Name)
		g.Expect(row.EthtoolGroup).To(MatchRegexp(`^[a-z-]+$`), "offload %s has no ethtool -k line", row.Name)
		g.Expect(len(row.Host)+len(row.Guest)).To(BeNumerically(">", 0), "offload %s sets no libvirt attribute", row.Name)
		g.Expect(row.Summary).NotTo(BeEmpty())
	}
	// A libvirt attribute or an ethtool feature belongs to one offload: two
	// rows switching it would fight over it.
	owner := map[string]string{}
	for _, row := range wellknown.Offloads {
		for kind, names := range map[string][]string{"host": row.Host, "guest": row.Guest, "ethtool": row.Ethtool, "ethtool -k line": {row.EthtoolGroup}} {
			for _, n := range names {
				key := kind + " " + n
				g.Expect(owner).NotTo(HaveKey(key), "%s is switched by %s and %s", key, owner[key], row.Name)
				owner[key] = row.Name
			}
		}
	}
	g.Expect(wellknown.OffloadNames()).To(Equal([]string{wellknown.OffloadTSO, wellknown.OffloadGSO, wellknown.OffloadGRO, wellknown.OffloadTXChecksum, wellknown.OffloadRXChecksum}))
}

func TestOffloadField(t *testing.T) {
	g := NewWithT(t)
	type offloads struct {
		TSO   *bool  `json:"tso,omitempty"`
		Other string `json:"other"`
	}
	var o offloads
	p := wellknown.OffloadField[*bool](&o, "tso")
	g.Expect(p).To(Equal(&o.TSO))
	g.Expect(wellknown.OffloadField[*bool](&o, "gso")).To(BeNil(), "no such field")
	g.Expect(wellknown.OffloadField[*bool](&o, "other")).To(BeNil(), "a field of another type")
}
