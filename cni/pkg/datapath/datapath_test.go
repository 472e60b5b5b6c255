package datapath_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
)

// TestMarkerKeyIsTheAgents: the plugin refuses bridges without the marker
// the node agent sets, so both must use the same key.
func TestMarkerKeyIsTheAgents(t *testing.T) {
	NewWithT(t).Expect(datapath.MarkerKey).To(Equal(bridge.MarkerKey))
}
