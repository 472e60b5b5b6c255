package plugin

import (
	"encoding/json"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// TestIPAMGCConf: the IPAM plugin's directory is the bridge's, shared by
// every attachment on it, so its GC must keep the runtime's valid
// attachments of this network and every recorded attachment of another;
// this network's records the runtime no longer lists are the ones to go.
// (host-local v1.9.1 implements no GC; an IPAM plugin that does would
// otherwise release its neighbours' addresses.)
func TestIPAMGCConf(t *testing.T) {
	g := NewWithT(t)
	conf, _, err := netconf.LoadNetConf([]byte(`{"cniVersion": "1.1.0", "name": "fp-a.db", "type": "fastpath", "namespace": "a",
		"bridge": "fp-br", "ipam": {"type": "host-local", "subnet": "10.250.0.0/25"},
		"cni.dev/valid-attachments": [{"containerID": "keep", "ifname": "net1"}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	out, err := ipamGCConf(conf, []*state.Attachment{
		{ContainerID: "keep", IfName: "net1", Network: "fp-a.db"},
		{ContainerID: "stale", IfName: "net1", Network: "fp-a.db"},
		{ContainerID: "neighbour", IfName: "pod1a2b", Network: "fp-b.web"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	var in struct {
		Name  string               `json:"name"`
		Valid []types.GCAttachment `json:"cni.dev/valid-attachments"`
		IPAM  map[string]any       `json:"ipam"`
	}
	g.Expect(json.Unmarshal(out, &in)).To(Succeed())
	g.Expect(in.Name).To(Equal(netconf.IPAMNetworkName("fp-br")))
	g.Expect(in.Valid).To(ConsistOf(types.GCAttachment{ContainerID: "keep", IfName: "net1"}, types.GCAttachment{ContainerID: "neighbour", IfName: "pod1a2b"}))
	g.Expect(in.IPAM).To(HaveKeyWithValue("dataDir", netconf.IPAMDataDir(conf.StateDir)))
}
