package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// killedAdd starts ADD of inv and SIGKILLs it after delay. It reports
// whether the kill landed (the process had not exited yet).
func killedAdd(t *testing.T, inv invocation, delay time.Duration) bool {
	t.Helper()
	cmd := exec.Command(bins.Plugin())
	cmd.Env = inv.env()
	cmd.Stdin = strings.NewReader(string(inv.conf))
	if err := cmd.Start(); err != nil {
		t.Fatalf("failed to start ADD: %v", err)
	}
	// The sleep is the thing under test, not synchronisation: it picks the
	// random point in ADD at which the kill lands.
	time.Sleep(delay)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	return false
}

// TestSIGKILLDuringAdd kills ADDs of the binary at random points, then, as
// a runtime does, retries half of them (the retry must succeed and pass
// CHECK) and deletes all of them; a GC follows. Nothing may be left: no
// state or temporary file, no address, no port, no veth.
func TestSIGKILLDuringAdd(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.StartOVS(t)
	const attachments = 16
	for _, datapath := range []string{netconf.DatapathLinuxBridge, netconf.DatapathOVS} {
		t.Run(datapath, func(t *testing.T) {
			g := NewWithT(t)
			br := cnitest.NewBridge(t, datapath, 9000)
			stateDir := t.TempDir()
			ipamDir := netconf.IPAMDataDir(stateDir)
			conf := br.NetConf(t, cnitest.Conf{CNIVersion: "1.0.0", StateDir: stateDir})
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))

			// Unkilled ADD/DELs measure how long ADD takes, to spread the kills
			// over it: the fastest of three, because the first ADD on a new
			// bridge (OVS above all) is slower than the ones that follow, and
			// kills spread over that first time would mostly land after exit.
			var addTime time.Duration
			for range 3 {
				probe := invocation{command: "ADD", containerID: containerID(), netns: cnitest.NewNS(t).Path(), ifName: "net1",
					cniPath: cnitest.SystemCNIPath, conf: conf}
				start := time.Now()
				_, err := probe.run()
				g.Expect(err).NotTo(HaveOccurred())
				if d := time.Since(start); addTime == 0 || d < addTime {
					addTime = d
				}
				probe.command = "DEL"
				_, err = probe.run()
				g.Expect(err).NotTo(HaveOccurred())
			}

			invs := make([]invocation, attachments)
			netnses := make([]ns.NetNS, attachments)
			landed := 0
			for i := range invs {
				netnses[i] = cnitest.NewNS(t)
				invs[i] = invocation{command: "ADD", containerID: containerID(), netns: netnses[i].Path(), ifName: "net1",
					cniPath: cnitest.SystemCNIPath, conf: conf}
				if killedAdd(t, invs[i], time.Duration(rng.Int64N(int64(addTime)))) {
					landed++
				}
				if i%2 == 1 {
					continue
				}
				out, err := invs[i].run()
				g.Expect(err).NotTo(HaveOccurred(), "ADD retried after a kill succeeds")
				var m, prev map[string]any
				g.Expect(json.Unmarshal(conf, &m)).To(Succeed())
				g.Expect(json.Unmarshal(out, &prev)).To(Succeed())
				m["prevResult"] = prev
				check := invs[i]
				check.command, check.conf = "CHECK", nil
				check.conf, _ = json.Marshal(m)
				_, err = check.run()
				g.Expect(err).NotTo(HaveOccurred(), "the retried ADD's attachment passes CHECK")
			}
			t.Logf("%s: %d of %d kills landed inside ADD (ADD takes %v)", datapath, landed, attachments, addTime)
			g.Expect(landed).To(BeNumerically(">=", attachments/4), "enough kills land inside ADD for the test to mean something")

			for i := range invs {
				del := invs[i]
				del.command = "DEL"
				_, err := del.run()
				g.Expect(err).NotTo(HaveOccurred())
			}
			var m map[string]any
			g.Expect(json.Unmarshal(conf, &m)).To(Succeed())
			m["cniVersion"] = "1.1.0"
			m["cni.dev/valid-attachments"] = []types.GCAttachment{}
			gcConf, _ := json.Marshal(m)
			_, err := invocation{command: "GC", cniPath: cnitest.SystemCNIPath, conf: gcConf}.run()
			g.Expect(err).NotTo(HaveOccurred(), "GC with Debian's host-local (no GC of its own) succeeds")

			entries, err := os.ReadDir(stateDir)
			g.Expect(err).NotTo(HaveOccurred())
			for _, e := range entries {
				g.Expect(e.Name()).To(BeElementOf("lock", netconf.IPAMDataDirName, leases.Dir), "no state or temporary file is left")
			}
			left, err := os.ReadDir(filepath.Join(stateDir, leases.Dir)) // OVS writes none
			g.Expect(err == nil || errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "reading the leases directory: %v", err)
			g.Expect(left).To(BeEmpty(), "no DHCP lease is left")
			g.Expect(cnitest.Allocations(t, ipamDir, br.Name)).To(BeEmpty())
			g.Expect(br.Ports(t)).To(BeEmpty())
			for i, n := range netnses {
				g.Expect(cnitest.Links(t, n)).To(ConsistOf("lo"))
				g.Expect(cnitest.LinkExists(plugin.HostIfName(invs[i].containerID, "net1"))).To(BeFalse())
			}
		})
	}
}

// TestBinaryPreflight checks the refusals the binary makes before the CNI
// library reads the configuration: a missing cniVersion gets the plugin's
// own message, and a configuration over netconf.MaxNetConfBytes is refused
// naming the limit.
func TestBinaryPreflight(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	inv := invocation{command: "ADD", containerID: containerID(), netns: "/var/run/netns/none", ifName: "net1",
		cniPath: cnitest.SystemCNIPath, conf: []byte(`{"name": "fp", "type": "fastpath", "ipam": {"type": "host-local"}}`)}
	_, err := inv.run()
	g.Expect(err).To(Equal(&types.Error{Code: types.ErrInvalidNetworkConfig, Msg: "cniVersion is required: must be one of 0.3.1, 0.4.0, 1.0.0, 1.1.0"}))
	inv.conf = []byte(`{"cniVersion": "1.0.0", "name": "fp", "pad": "` + strings.Repeat("x", netconf.MaxNetConfBytes) + `"}`)
	_, err = inv.run()
	g.Expect(err).To(Equal(&types.Error{Code: types.ErrInvalidNetworkConfig,
		Msg: "network configuration is larger than 1048576 bytes (netconf.MaxNetConfBytes): refused"}))
}
