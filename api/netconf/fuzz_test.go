package netconf

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// FuzzLoadNetConf checks that LoadNetConf never panics, that every error is a
// CNI error with a decoding, version or configuration code, and that every
// accepted configuration is fully defaulted, within the documented ranges and
// stable under a marshal/load round trip (what the operator relies on when it
// renders a NetConf). Seeds: testdata/fuzz/FuzzLoadNetConf plus the ones below.
func FuzzLoadNetConf(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"fp-db-link","type":"fastpath","datapath":"LinuxBridge","bridge":"fastpath0","mtu":9000,"offloads":{"tso":true,"gso":true,"gro":true,"txChecksum":true},"ipam":{"type":"host-local","subnet":"10.250.0.0/24"}}`))
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"n","datapath":"OVS","ovs":{"socket":"unix:/run/db.sock"},"ipam":{"type":"static"},"cni.dev/valid-attachments":[{"containerID":"a","ifname":"b"}]}`))
	f.Add([]byte(`{"cniVersion":"0.3.1","name":"n","mtu":65536,"ipam":{"type":"x"}}`))
	f.Add([]byte(`{"cniVersion":"0.4.0","name":"n","offloads":{"tso":false,"txChecksum":false,"rxChecksum":false,"lro":true},"ipam":{"type":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := NewWithT(t)
		conf, version, err := LoadNetConf(data)
		if err != nil {
			var cniErr *types.Error
			g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v is not a *types.Error", err)
			g.Expect(cniErr.Code).To(BeElementOf(types.ErrIncompatibleCNIVersion, types.ErrDecodingFailure, types.ErrInvalidNetworkConfig))
			g.Expect(cniErr.Msg).NotTo(BeEmpty())
			return
		}
		g.Expect(version).To(Equal(conf.CNIVersion))
		g.Expect(slices.Contains(SupportedVersions, version)).To(BeTrue())
		g.Expect(conf.Datapath).To(BeElementOf(DatapathLinuxBridge, DatapathOVS, DatapathMacvtap))
		g.Expect(ValidateBridgeName(conf.Bridge)).To(Succeed())
		g.Expect(conf.MTU).To(BeNumerically(">=", wellknown.MinMTU))
		g.Expect(conf.MTU).To(BeNumerically("<=", wellknown.MaxMTU))
		for _, row := range wellknown.Offloads {
			g.Expect(*conf.Offloads.Offload(row.Name)).NotTo(BeNil(), row.Name)
		}
		g.Expect(conf.IPAM.Type()).NotTo(BeEmpty())
		g.Expect(conf.OVS.Socket).NotTo(BeEmpty())
		g.Expect(conf.StateDir).To(HavePrefix("/"))
		// The IPAM plugin gets only the IPAM keys and the node's data directory.
		var ipamIn struct {
			IPAM map[string]any `json:"ipam"`
		}
		g.Expect(json.Unmarshal(conf.IPAMConf, &ipamIn)).To(Succeed())
		g.Expect(ipamIn.IPAM).To(HaveKeyWithValue("dataDir", IPAMDataDir(conf.StateDir)))
		var named struct {
			Name string `json:"name"`
		}
		g.Expect(json.Unmarshal(conf.IPAMConf, &named)).To(Succeed())
		g.Expect(named.Name).To(Equal(IPAMNetworkName(conf.Bridge)), "one allocator per bridge")
		for k := range ipamIn.IPAM {
			g.Expect(append([]string{"dataDir"}, IPAMKeys...)).To(ContainElement(k))
		}

		out, err := json.Marshal(conf)
		g.Expect(err).NotTo(HaveOccurred())
		again, _, err := LoadNetConf(out)
		g.Expect(err).NotTo(HaveOccurred(), "round trip of %s", out)
		again.IPAMConf, conf.IPAMConf = nil, nil // made from each input's other keys
		g.Expect(again).To(Equal(conf))
	})
}
