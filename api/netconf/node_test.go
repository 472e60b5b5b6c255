package netconf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// nodeConfig writes nc as the node configuration the test's LoadNetConf reads.
func nodeConfig(t *testing.T, nc NodeConfig) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fastpath.d", "node.json")
	NewWithT(t).Expect(WriteNodeConfig(path, nc)).To(Succeed())
	t.Setenv(NodeConfigEnv, path)
	return path
}

func TestNetConfMustNotNameHostPathsOrAddresses(t *testing.T) {
	base := `"cniVersion": "1.0.0", "name": "fp", "type": "fastpath", "ipam": {"type": "host-local"}`
	for field, conf := range map[string]string{
		"stateDir":   `{` + base + `, "stateDir": "/etc/cni/net.d"}`,
		"ovs.socket": `{` + base + `, "datapath": "OVS", "ovs": {"socket": "tcp:203.0.113.1:6640"}}`,
	} {
		t.Run(field, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := LoadNetConf([]byte(conf))
			g.Expect(err).To(HaveOccurred())
			cniErr, ok := err.(*types.Error)
			g.Expect(ok).To(BeTrue(), "%T %v", err, err)
			g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
			g.Expect(cniErr.Msg).To(HavePrefix(field + " is not accepted in a network configuration"))
		})
	}
}

func TestNodeConfigFillsHostPaths(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(NodeConfigEnv, filepath.Join(t.TempDir(), "missing.json"))
	conf, _, err := LoadNetConf([]byte(`{"cniVersion": "1.0.0", "name": "fp", "ipam": {"type": "host-local"}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conf.StateDir).To(Equal(DefaultStateDir), "a missing node configuration means the defaults")
	g.Expect(conf.OVS.Socket).To(Equal(wellknown.DefaultOVSSocket))

	path := nodeConfig(t, NodeConfig{StateDir: "/run/fastpath", OVS: OVS{Socket: "unix:/run/ovs/db.sock"}})
	conf, _, err = LoadNetConf([]byte(`{"cniVersion": "1.0.0", "name": "fp", "ipam": {"type": "host-local"}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conf.StateDir).To(Equal("/run/fastpath"))
	g.Expect(conf.OVS.Socket).To(Equal("unix:/run/ovs/db.sock"))
	st, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o644)))
}

func TestLoadNodeConfigRefusesFilesTheNodeDoesNotTrust(t *testing.T) {
	// Each file must be root's (or, in one case, chowned away from root):
	// make test runs as root.
	testutil.RequireRoot(t)
	write := func(t *testing.T, body string, mode os.FileMode) string {
		path := filepath.Join(t.TempDir(), "node.json")
		NewWithT(t).Expect(os.WriteFile(path, []byte(body), mode)).To(Succeed())
		NewWithT(t).Expect(os.Chmod(path, mode)).To(Succeed())
		return path
	}
	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		uid        int
		msg        string
	}{
		{"group writable", `{}`, 0o664, 0, "is writable by group or others (mode 0664)"},
		{"unknown key", `{"stateDir": "/x", "cniBinDir": "/tmp"}`, 0o644, 0, `unknown field "cniBinDir"`},
		{"relative state dir", `{"stateDir": "x"}`, 0o644, 0, `stateDir "x" is invalid: must be an absolute path`},
		{"bad socket", `{"ovs": {"socket": "/run/db.sock"}}`, 0o644, 0, `ovs.socket "/run/db.sock" is invalid`},
		{"not root's", `{}`, 0o644, 1000, "is owned by uid 1000: it must be owned by root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path := write(t, tc.body, tc.mode)
			if tc.uid != 0 {
				g.Expect(os.Chown(path, tc.uid, tc.uid)).To(Succeed())
			}
			_, err := LoadNodeConfig(path)
			g.Expect(err).To(MatchError(And(ContainSubstring(path), ContainSubstring(tc.msg))))
		})
	}
}
