package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

var bins *cnitest.Binaries

func TestMain(m *testing.M) {
	os.Exit(cnitest.Main(m, true, &bins))
}

// invocation is one execution of the built binary, with the environment a
// runtime (Multus) sets; an empty cniArgs means cnitest.PodArgs (a pod of
// cnitest.Namespace, the namespace cnitest netconfs name by default).
type invocation struct {
	command, containerID, netns, ifName, cniArgs, cniPath string
	conf                                                  []byte
}

func (i invocation) env() []string {
	if i.cniArgs == "" {
		i.cniArgs = cnitest.PodArgs
	}
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"CNI_COMMAND=" + i.command,
		"CNI_CONTAINERID=" + i.containerID,
		"CNI_NETNS=" + i.netns,
		"CNI_IFNAME=" + i.ifName,
		"CNI_ARGS=" + i.cniArgs,
		"CNI_PATH=" + i.cniPath,
		netconf.NodeConfigEnv + "=" + os.Getenv(netconf.NodeConfigEnv),
	}
}

// run executes the binary; a non-zero exit returns the CNI error it printed.
func (i invocation) run() (stdout []byte, err error) {
	stdout, _, err = i.runLogged()
	return stdout, err
}

// runLogged is run that also returns what the binary logged (stderr).
func (i invocation) runLogged() (stdout, stderr []byte, err error) {
	stdout, stderr, err = cnitest.Exec(context.Background(), bins.Plugin(), i.env(), i.conf)
	if err != nil {
		cniErr := &types.Error{}
		if jerr := json.Unmarshal(stdout, cniErr); jerr == nil && cniErr.Msg != "" {
			return stdout, stderr, cniErr
		}
		return stdout, stderr, fmt.Errorf("%s: %w; stdout %q; stderr %q", i.command, err, stdout, stderr)
	}
	return stdout, stderr, nil
}

// kubevirtIfName is KubeVirt's pod interface name for a secondary network:
// "pod" + the first 11 hex digits of sha256(network name) (docs/design.md §4.1).
func kubevirtIfName(network string) string {
	sum := sha256.Sum256([]byte(network))
	return "pod" + hex.EncodeToString(sum[:])[:11]
}

// containerID is a 64-hex-digit ID like the ones containerd gives sandboxes.
func containerID() string {
	sum := sha256.Sum256([]byte(testutil.UniqueName("sandbox")))
	return hex.EncodeToString(sum[:])
}

// TestBinaryLikeMultus drives the built binary the way Multus does: netconf
// with runtimeConfig on stdin, CNI_ARGS with the pod identity, a KubeVirt
// interface name, Debian's host-local from /usr/lib/cni, stdout only for the
// result.
func TestBinaryLikeMultus(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.StartOVS(t)
	for _, datapath := range []string{netconf.DatapathLinuxBridge, netconf.DatapathOVS} {
		t.Run(datapath, func(t *testing.T) {
			g := NewWithT(t)
			br := cnitest.NewBridge(t, datapath, 9000)
			stateDir := t.TempDir()
			ipamDir := netconf.IPAMDataDir(stateDir)
			netns := cnitest.NewNS(t)
			ifName := kubevirtIfName("fp-db-link")
			conf := br.NetConf(t, cnitest.Conf{CNIVersion: "1.0.0", Name: "fp-db-link", Namespace: "apps", StateDir: stateDir,
				Extra: map[string]any{"capabilities": map[string]bool{"mac": true}, "runtimeConfig": map[string]any{"mac": "02:fa:57:00:00:42"}}})
			cid := containerID()
			inv := invocation{containerID: cid, netns: netns.Path(), ifName: ifName, cniPath: cnitest.SystemCNIPath, conf: conf,
				cniArgs: "IgnoreUnknown=1;K8S_POD_NAMESPACE=apps;K8S_POD_NAME=virt-launcher-db-0-x7k2p;K8S_POD_INFRA_CONTAINER_ID=" + cid + ";K8S_POD_UID=0d5c1e2f"}

			inv.command = "ADD"
			out, err := inv.run()
			g.Expect(err).NotTo(HaveOccurred())
			r, err := version.NewResult("1.0.0", out)
			g.Expect(err).NotTo(HaveOccurred(), "stdout is exactly one CNI result: %s", out)
			res, err := current.GetResult(r)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Interfaces[1].Name).To(Equal(ifName))
			g.Expect(res.Interfaces[1].Mac).To(Equal("02:fa:57:00:00:42"))
			g.Expect(res.IPs).To(HaveLen(1))
			g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo", ifName))
			hostIf := plugin.HostIfName(cid, ifName)
			g.Expect(br.Ports(t)).To(ConsistOf(hostIf))
			if datapath == netconf.DatapathOVS {
				ovsPod, err := runOut("ovs-vsctl", "--db="+br.OVSSocket, "get", "Port", hostIf, `external_ids:"fastpath.io/pod"`)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ovsPod).To(Equal(`"apps/virt-launcher-db-0-x7k2p"`))
			}

			var m, prev map[string]any
			g.Expect(json.Unmarshal(conf, &m)).To(Succeed())
			g.Expect(json.Unmarshal(out, &prev)).To(Succeed())
			m["prevResult"] = prev
			checkConf, _ := json.Marshal(m)
			check := inv
			check.command, check.conf = "CHECK", checkConf
			out, err = check.run()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(BeEmpty())

			inv.command = "DEL"
			for range 2 {
				out, err = inv.run()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(out).To(BeEmpty())
			}
			g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo"))
			g.Expect(br.Ports(t)).To(BeEmpty())
			g.Expect(cnitest.StateFiles(t, stateDir)).To(BeEmpty())
			g.Expect(cnitest.Allocations(t, ipamDir, br.Name)).To(BeEmpty())
		})
	}
}

// TestBinaryErrorsAndVersions checks the binary's CNI protocol surface: the
// VERSION answer, a configuration error as JSON on stdout with exit status
// 1, and STATUS and GC (CNI 1.1) with the host-local built from plugins v1.9.1.
func TestBinaryErrorsAndVersions(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)

	out, err := invocation{command: "VERSION", conf: []byte(`{"cniVersion": "1.1.0"}`)}.run()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchJSON(`{"cniVersion": "1.1.0", "supportedVersions": ["0.3.1", "0.4.0", "1.0.0", "1.1.0"]}`))

	br := cnitest.NewBridge(t, netconf.DatapathLinuxBridge, 9000)
	netns := cnitest.NewNS(t)
	bad := br.NetConf(t, cnitest.Conf{CNIVersion: "1.0.0", MTU: 70000, StateDir: t.TempDir()})
	_, err = invocation{command: "ADD", containerID: containerID(), netns: netns.Path(), ifName: "net1", cniPath: cnitest.SystemCNIPath, conf: bad}.run()
	g.Expect(err).To(Equal(&types.Error{Code: types.ErrInvalidNetworkConfig, Msg: "mtu 70000 is out of range: must be 1280-65535"}))

	stateDir := t.TempDir()
	conf := br.NetConf(t, cnitest.Conf{CNIVersion: "1.1.0", StateDir: stateDir})
	_, err = invocation{command: "STATUS", cniPath: bins.CNIPath("1.1.0"), conf: conf}.run()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = invocation{command: "GC", cniPath: bins.CNIPath("1.1.0"), conf: conf}.run()
	g.Expect(err).NotTo(HaveOccurred())

	missing := *br
	missing.Name = testutil.UniqueName("fpcnone")
	_, err = invocation{command: "STATUS", cniPath: bins.CNIPath("1.1.0"), conf: missing.NetConf(t, cnitest.Conf{CNIVersion: "1.1.0", StateDir: stateDir})}.run()
	g.Expect(err).To(BeAssignableToTypeOf(&types.Error{}))
	g.Expect(err.(*types.Error).Code).To(BeEquivalentTo(types.ErrPluginNotAvailable))
}

// TestConcurrentAddDel runs 50 ADD/DEL pairs of the binary at once per
// datapath and checks that every ADD got its own address and that nothing
// is left behind.
func TestConcurrentAddDel(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.StartOVS(t)
	const pairs = 50
	for _, datapath := range []string{netconf.DatapathLinuxBridge, netconf.DatapathOVS} {
		t.Run(datapath, func(t *testing.T) {
			g := NewWithT(t)
			br := cnitest.NewBridge(t, datapath, 9000)
			stateDir := t.TempDir()
			ipamDir := netconf.IPAMDataDir(stateDir)
			conf := br.NetConf(t, cnitest.Conf{CNIVersion: "1.0.0", StateDir: stateDir})
			netnses := make([]ns.NetNS, pairs)
			for i := range netnses {
				netnses[i] = cnitest.NewNS(t)
			}

			var wg sync.WaitGroup
			var mu sync.Mutex
			ips := map[string]int{}
			errs := make([]error, pairs)
			delLogs := make([]string, pairs) // what each DEL logged (stderr)
			cids := make([]string, pairs)
			for i := range cids {
				cids[i] = containerID()
			}
			for i := range pairs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					inv := invocation{command: "ADD", containerID: cids[i], netns: netnses[i].Path(), ifName: "net1",
						cniPath: cnitest.SystemCNIPath, conf: conf}
					out, err := inv.run()
					if err != nil {
						errs[i] = err
						return
					}
					r, err := version.NewResult("1.0.0", out)
					if err == nil {
						res, _ := current.GetResult(r)
						mu.Lock()
						ips[res.IPs[0].Address.IP.String()]++
						mu.Unlock()
					}
					inv.command = "DEL"
					var stderr []byte
					_, stderr, errs[i] = inv.runLogged()
					delLogs[i] = string(stderr)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				g.Expect(err).NotTo(HaveOccurred(), "pair %d", i)
			}
			g.Expect(ips).To(HaveLen(pairs), "every ADD got a distinct address")
			// A DEL that reports success is not called again, and no GC is
			// guaranteed: each DEL must have removed its port itself. The
			// DELs that logged about OVSDB (waited for it) show what the
			// load did to it, those that kept their record "for GC" what it
			// cost, and the logs of those whose port is left why.
			waited, kept := 0, 0
			for i, l := range delLogs {
				if strings.Contains(l, "OVSDB") {
					waited++
				}
				if _, err := os.Stat(filepath.Join(stateDir, cids[i]+":net1.json")); err == nil {
					kept++
				}
			}
			t.Logf("%d of %d DELs logged about OVSDB (waited for it), %d kept their record for GC", waited, pairs, kept)
			ports := br.Ports(t)
			g.Expect(ports).To(BeEmpty(), "ports left by DELs that succeeded; %d of %d DELs logged about OVSDB, %d kept their record for GC; the logs of those whose port is left:\n%s",
				waited, pairs, kept, delLogsOf(ports, cids, delLogs))
			g.Expect(kept).To(BeZero(), "DELs that succeeded and kept their record for a GC no runtime is bound to run")
			g.Expect(cnitest.StateFiles(t, stateDir)).To(BeEmpty())
			g.Expect(cnitest.Allocations(t, ipamDir, br.Name)).To(BeEmpty())
			for _, n := range netnses {
				g.Expect(cnitest.Links(t, n)).To(ConsistOf("lo"))
			}
			for _, cid := range cids {
				g.Expect(cnitest.LinkExists(plugin.HostIfName(cid, "net1"))).To(BeFalse(), "host veth of %s", cid)
			}
			entries, err := os.ReadDir(stateDir)
			g.Expect(err).NotTo(HaveOccurred())
			for _, e := range entries {
				g.Expect(e.Name()).To(BeElementOf("lock", netconf.IPAMDataDirName, leases.Dir), "only the lock file, IPAM's and the (empty) leases directory stay in %s", filepath.Base(stateDir))
			}
			left, err := os.ReadDir(filepath.Join(stateDir, leases.Dir)) // OVS writes none
			g.Expect(err == nil || errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "reading the leases directory: %v", err)
			g.Expect(left).To(BeEmpty(), "no DHCP lease is left")
		})
	}
}

// delLogsOf returns what the DELs of the pairs whose host veth is in ports
// logged; cids are the pairs' container IDs and logs their DELs' stderr.
func delLogsOf(ports, cids, logs []string) string {
	var b strings.Builder
	for i, cid := range cids {
		if slices.Contains(ports, plugin.HostIfName(cid, "net1")) {
			fmt.Fprintf(&b, "pair %d (%s): %s\n", i, plugin.HostIfName(cid, "net1"), logs[i])
		}
	}
	return b.String()
}

func runOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
