package probe_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
	"github.com/fastpath-io/fastpath/internal/node/probe"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// fakeDev makes a device directory holding the given entries (plain files:
// Probe checks existence only).
func fakeDev(t *testing.T, entries ...string) string {
	dir := t.TempDir()
	for _, e := range entries {
		p := filepath.Join(dir, e)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestProbeDevices(t *testing.T) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	release := unix.ByteSliceToString(u.Release[:])

	for _, tc := range []struct {
		name     string
		entries  []string
		want     fastpathv1alpha1.NodeCapabilities
		problems []string
	}{
		{"none", nil, fastpathv1alpha1.NodeCapabilities{},
			[]string{probe.MsgVhostNetMissing, probe.MsgVhostVSOCKMissing, probe.MsgTunMissing}},
		{"no vsock", []string{probe.VhostNetDevice, probe.TunDevice},
			fastpathv1alpha1.NodeCapabilities{VhostNet: true, Tun: true}, []string{probe.MsgVhostVSOCKMissing}},
		{"all", []string{probe.VhostNetDevice, probe.VhostVSOCKDevice, probe.TunDevice},
			fastpathv1alpha1.NodeCapabilities{VhostNet: true, VhostVSOCK: true, Tun: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := (&probe.Host{DevDir: fakeDev(t, tc.entries...), SysDir: t.TempDir()}).Probe(context.Background())
			g.Expect(got.Kernel).To(Equal(release))
			g.Expect(got.OVS).To(Equal(&fastpathv1alpha1.OVSInfo{Message: "no OVSDB endpoint configured"}))
			got.Kernel, got.OVS = "", nil
			g.Expect(got).To(Equal(tc.want))
			g.Expect(probe.Problems(got)).To(Equal(tc.problems))
		})
	}
}

func TestProbeDatapathTypes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []string
		want    []fastpathv1alpha1.Datapath
	}{
		{"none", nil, nil},
		{"bridge", []string{probe.BridgeModule + "/refcnt"}, []fastpathv1alpha1.Datapath{fastpathv1alpha1.DatapathLinuxBridge}},
		{"macvtap", []string{probe.MacvtapClass + "/tap12"}, []fastpathv1alpha1.Datapath{fastpathv1alpha1.DatapathMacvtap}},
		{"both", []string{probe.BridgeModule + "/refcnt", probe.MacvtapClass + "/tap12"},
			[]fastpathv1alpha1.Datapath{fastpathv1alpha1.DatapathLinuxBridge, fastpathv1alpha1.DatapathMacvtap}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := (&probe.Host{DevDir: t.TempDir(), SysDir: fakeDev(t, tc.entries...)}).Probe(context.Background())
			g.Expect(got.DatapathTypes).To(Equal(tc.want))
		})
	}
}

// TestProbeDatapathTypesOfThisKernel reads the real /sys: the development
// kernel (6.18, CONFIG_MACVTAP=y) has macvtap, and the probe must say so
// exactly when the kernel registered the macvtap class.
func TestProbeDatapathTypesOfThisKernel(t *testing.T) {
	g := NewWithT(t)
	_, err := os.Stat("/sys/class/macvtap")
	got := (&probe.Host{DevDir: t.TempDir()}).Probe(context.Background())
	if err == nil {
		g.Expect(got.DatapathTypes).To(ContainElement(fastpathv1alpha1.DatapathMacvtap))
	} else {
		g.Expect(got.DatapathTypes).NotTo(ContainElement(fastpathv1alpha1.DatapathMacvtap))
	}
}

func TestProbeOVSUnreachable(t *testing.T) {
	g := NewWithT(t)
	endpoint := "unix:" + filepath.Join(t.TempDir(), "db.sock")
	conn := ovsdb.NewConn(endpoint, testr.New(t))
	t.Cleanup(conn.Close)
	got := (&probe.Host{DevDir: t.TempDir(), OVS: conn}).Probe(context.Background())
	g.Expect(got.OVS).NotTo(BeNil())
	g.Expect(got.OVS.Reachable).To(BeFalse())
	g.Expect(got.OVS.Message).To(MatchRegexp(`^OVSDB at %s does not answer \(.*connect: no such file or directory\): is Open vSwitch installed and running`, regexp.QuoteMeta(endpoint)))
}

func TestProbeOVSReachable(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	conn := ovsdb.NewConn(testutil.StartOVS(t), testr.New(t))
	t.Cleanup(conn.Close)
	got := (&probe.Host{OVS: conn}).Probe(context.Background())
	g.Expect(got.OVS).NotTo(BeNil())
	g.Expect(got.OVS.Reachable).To(BeTrue(), got.OVS.Message)
	g.Expect(got.OVS.Message).To(BeEmpty())
	g.Expect(got.OVS.DatapathTypes).To(ContainElement("netdev"))
	// ovs-ctl records the version it started: compare with ovs-vswitchd's own.
	out, err := exec.Command("ovs-vswitchd", "--version").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.SplitN(string(out), "\n", 2)[0]).To(HaveSuffix(" " + got.OVS.Version))
}

func TestStaticReturnsACopy(t *testing.T) {
	g := NewWithT(t)
	s := probe.Static{Capabilities: fastpathv1alpha1.NodeCapabilities{OVS: &fastpathv1alpha1.OVSInfo{DatapathTypes: []string{"netdev"}}}}
	got := s.Probe(context.Background())
	got.OVS.DatapathTypes[0] = "changed"
	g.Expect(s.Capabilities.OVS.DatapathTypes).To(Equal([]string{"netdev"}))
}
