package netconf

import (
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"
)

func TestParseDeviceID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want int
		ok   bool
	}{
		{"tap1073741824", MinTapIndex, true},
		{"tap1074790399", MaxTapIndex, true},
		{"tap1073741900", 1073741900, true},
		{"tap1074790400", 0, false}, // MaxTapIndex+1
		{"tap1073741823", 0, false}, // MinTapIndex-1
		{"tap3", 0, false},
		{"tap01073741824", 0, false},
		{"tap+1073741824", 0, false},
		{"1073741824", 0, false},
		{"TAP1073741824", 0, false},
		{"0000:81:00.1", 0, false}, // an SR-IOV PCI address
		{"", 0, false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			g := NewWithT(t)
			n, err := ParseDeviceID(tc.id)
			if !tc.ok {
				g.Expect(err).To(MatchError(ContainSubstring("deviceID %q is invalid on datapath Macvtap: must be tap<N> with N in 1073741824-1074790399", tc.id)))
				g.Expect(err.(*types.Error).Code).To(Equal(uint(types.ErrInvalidNetworkConfig)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n).To(Equal(tc.want))
			g.Expect(FormatDeviceID(n)).To(Equal(tc.id))
		})
	}
}

func TestLoadNetConfMacvtap(t *testing.T) {
	g := NewWithT(t)
	// As Multus passes it: deviceID and pciBusID added at the top level.
	conf, _, err := LoadNetConf([]byte(`{"cniVersion": "1.0.0", "name": "fp-db", "type": "fastpath",
		"datapath": "Macvtap", "bridge": "fastpath1", "mtu": 65535,
		"ipam": {"type": "host-local", "subnet": "10.250.0.0/24"},
		"deviceID": "tap1073741900", "pciBusID": "tap1073741900"}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conf.Datapath).To(Equal(DatapathMacvtap))
	g.Expect(conf.Bridge).To(Equal("fastpath1"))
	g.Expect(conf.TapIndex()).To(Equal(1073741900))

	conf, _, err = LoadNetConf([]byte(`{"cniVersion": "1.0.0", "name": "fp-db", "type": "fastpath", "datapath": "Macvtap",
		"ipam": {"type": "host-local", "subnet": "10.250.0.0/24"}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conf.TapIndex()).To(Equal(0), "without a device plugin the kernel picks the index")

	// Another datapath ignores a deviceID.
	conf, _, err = LoadNetConf([]byte(`{"cniVersion": "1.0.0", "name": "fp-db", "type": "fastpath",
		"ipam": {"type": "host-local", "subnet": "10.250.0.0/24"}, "deviceID": "0000:81:00.1"}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conf.Datapath).To(Equal(DatapathLinuxBridge))
}

func TestLoadNetConfMacvtapRefusals(t *testing.T) {
	for _, tc := range []struct{ name, extra, msg string }{
		{"bad device", `"deviceID": "tap7"`, `deviceID "tap7" is invalid on datapath Macvtap: must be tap<N> with N in 1073741824-1074790399`},
		{"tso off", `"offloads": {"tso": false}`, "offloads.tso false is not possible on datapath Macvtap: the kernel keeps a macvtap's offloads on or takes them from its lower device"},
		{"gro off", `"offloads": {"gro": false}`, "offloads.gro false is not possible on datapath Macvtap"},
		{"gso off", `"offloads": {"gso": false}`, "offloads.gso false is not possible on datapath Macvtap"},
		{"rxChecksum off", `"offloads": {"rxChecksum": false}`, "offloads.rxChecksum false is not possible on datapath Macvtap"},
		{"case", `"deviceid": "tap1073741900"`, `network configuration has unknown key "deviceid": keys are case-sensitive, the key is "deviceID"`},
		{"unknown datapath", `"datapath": "MacVTap"`, `datapath "MacVTap" is not supported: must be LinuxBridge, OVS or Macvtap`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dp := `"datapath": "Macvtap", `
			if tc.name == "unknown datapath" {
				dp = ""
			}
			_, _, err := LoadNetConf([]byte(`{"cniVersion": "1.0.0", "name": "fp-db", "type": "fastpath", ` + dp +
				`"ipam": {"type": "host-local", "subnet": "10.250.0.0/24"}, ` + tc.extra + `}`))
			g.Expect(err).To(MatchError(ContainSubstring(tc.msg)))
			g.Expect(err.(*types.Error).Code).To(Equal(uint(types.ErrInvalidNetworkConfig)))
		})
	}
}
