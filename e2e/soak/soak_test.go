package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// binDir holds the binaries TestMain built: fastpath, fastpath-operator,
// fastpath-agent and fastpath-vsock-backend.
var binDir string

// TestMain builds the binaries the parts run once, runs the tests and
// removes the binaries.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fastpath-soak-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// The agent part runs fastpath-vsock-backend as user 65532.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The product's binaries build in the product module, with its go.mod:
	// this module pins only what the harness imports.
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name, pkg := range map[string]string{
		wellknown.PluginType:     "./cni/cmd/fastpath",
		netconf.OVSPluginBinary:  "./cni/cmd/fastpath-ovs-plugin",
		"fastpath-operator":      "./cmd/fastpath-operator",
		"fastpath-agent":         "./cmd/fastpath-agent",
		"fastpath-vsock-backend": "./cmd/fastpath-vsock-backend",
	} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "failed to build %s: %v: %s\n", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func bin(name string) string { return filepath.Join(binDir, name) }

// check fails t unless the part ran (err nil), lost and leaked nothing,
// survived every fault, injected at least minFaults (a fault that never
// landed tests nothing) and ran the cycles it was asked for.
func check(t *testing.T, part string, s Summary, err error, cycles func(Summary) bool, minFaults int) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Log(s.String())
	for _, p := range s.Problems {
		t.Error(p)
	}
	if !s.OK() || !cycles(s) || s.Survived != s.Faults {
		t.Errorf("%s soak failed: %s", part, s)
	}
	if s.Faults < minFaults {
		t.Errorf("%s soak: %d faults landed while work was under way, want at least %d: %s", part, s.Faults, minFaults, s)
	}
}

// TestPluginShort is the short plugin part of make test: 60 cycles per
// datapath in batches of 20 with every fault kind; nothing may be lost or
// leaked.
func TestPluginShort(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := os.Stat("/usr/lib/cni/host-local"); err != nil {
		t.Fatalf("Debian's host-local is needed (package containernetworking-plugins): %v", err)
	}
	testutil.StartOVS(t)
	for i, datapath := range []string{netconf.DatapathLinuxBridge, netconf.DatapathOVS} {
		t.Run(datapath, func(t *testing.T) {
			s, err := RunPlugin(context.Background(), PluginOptions{Plugin: bin(wellknown.PluginType), Datapath: datapath, Cycles: 60, Batch: 20,
				Seed: uint64(time.Now().UnixNano()) + uint64(i), WorkDir: t.TempDir(), Logf: t.Logf})
			check(t, "plugin", s, err, func(s Summary) bool { return s.Cycles >= 60 }, 1)
		})
	}
}

// TestOperatorShort is the short operator part of make test: 60 VMs, two
// rounds with up to two operator kills per phase after a measuring round.
func TestOperatorShort(t *testing.T) {
	s, err := RunOperator(context.Background(), OperatorOptions{Binary: bin("fastpath-operator"), VMs: 60, Rounds: 2, KillsPerPhase: 2,
		Seed: uint64(time.Now().UnixNano()), WorkDir: t.TempDir(), Log: testr.New(t)})
	check(t, "operator", s, err, func(s Summary) bool { return s.Cycles == 3 }, 1)
}

// TestAPIServerShort is the short apiserver part of make test: 60 VMs, one
// round with one kube-apiserver restart per phase after a measuring round.
func TestAPIServerShort(t *testing.T) {
	s, err := RunAPIServer(context.Background(), OperatorOptions{Binary: bin("fastpath-operator"), VMs: 60, Rounds: 1, KillsPerPhase: 1,
		Seed: uint64(time.Now().UnixNano()), WorkDir: t.TempDir(), Log: testr.New(t)})
	check(t, "apiserver", s, err, func(s Summary) bool { return s.Cycles == 2 }, 1)
}

// TestAgentShort is the short agent part of make test: two rounds of
// bridge creation and relaying with an agent kill in each, then three kills
// during the streams (a TCP connection over the fast path, relayed
// connections through the relay in the vsock backend process, which must
// carry every byte through the kills).
func TestAgentShort(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := os.Stat("/usr/lib/cni/host-local"); err != nil {
		t.Fatalf("Debian's host-local is needed (package containernetworking-plugins): %v", err)
	}
	s, err := RunAgent(context.Background(), AgentOptions{Binary: bin("fastpath-agent"), Plugin: bin(wellknown.PluginType), Backend: bin("fastpath-vsock-backend"),
		Rounds: 2, Bridges: 2, StreamKills: 3, Seed: uint64(time.Now().UnixNano()), WorkDir: t.TempDir(), Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 2 {
		t.Fatalf("want the rounds' and the streams' summaries, got %v", s)
	}
	check(t, "agent", s[0], err, func(s Summary) bool { return s.Cycles == 2 }, 2)
	check(t, "agent/streams", s[1], err, func(s Summary) bool { return s.Cycles == 3 }, 3)
}
