package soak

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/fastpath-io/fastpath/cni/pkg/netconf"
	"github.com/fastpath-io/fastpath/internal/testing/ovstest"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// buildPlugin compiles the fastpath binary for the test.
func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), netconf.PluginType)
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fastpath-io/fastpath/cni/cmd/fastpath").CombinedOutput(); err != nil {
		t.Fatalf("failed to build the plugin: %v: %s", err, out)
	}
	return bin
}

// TestPluginShort is the short plugin part of make test: 60 cycles per
// datapath in batches of 20 with every fault kind; nothing may be lost or
// leaked.
func TestPluginShort(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := os.Stat("/usr/lib/cni/host-local"); err != nil {
		t.Fatalf("Debian's host-local is needed (package containernetworking-plugins): %v", err)
	}
	ovstest.Start(t)
	bin := buildPlugin(t)
	for i, datapath := range []string{netconf.DatapathLinuxBridge, netconf.DatapathOVS} {
		t.Run(datapath, func(t *testing.T) {
			s, err := RunPlugin(context.Background(), PluginOptions{Plugin: bin, Datapath: datapath, Cycles: 60, Batch: 20,
				Seed: uint64(time.Now().UnixNano()) + uint64(i), WorkDir: t.TempDir(), Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(s.String())
			for _, p := range s.Problems {
				t.Error(p)
			}
			if !s.OK() || s.Cycles < 60 || s.Faults == 0 || s.Survived != s.Faults {
				t.Errorf("plugin soak failed: %s", s)
			}
		})
	}
}

// TestOperatorShort is the short operator part of make test: 60 VMs, two
// rounds with up to two operator kills per phase after a measuring round.
func TestOperatorShort(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fastpath-operator")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fastpath-io/fastpath/cmd/fastpath-operator").CombinedOutput(); err != nil {
		t.Fatalf("failed to build the operator: %v: %s", err, out)
	}
	s, err := RunOperator(context.Background(), OperatorOptions{Binary: bin, VMs: 60, Rounds: 2, KillsPerPhase: 2,
		Seed: uint64(time.Now().UnixNano()), WorkDir: t.TempDir(), Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(s.String())
	for _, p := range s.Problems {
		t.Error(p)
	}
	if !s.OK() || s.Cycles != 3 || s.Survived != s.Faults {
		t.Errorf("operator soak failed: %s", s)
	}
	if s.Faults == 0 {
		t.Errorf("no operator kill landed while a phase was under way: %s", s)
	}
}

// TestAPIServerShort is the short apiserver part of make test: 60 VMs, one
// round with one kube-apiserver restart per phase after a measuring round.
func TestAPIServerShort(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fastpath-operator")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fastpath-io/fastpath/cmd/fastpath-operator").CombinedOutput(); err != nil {
		t.Fatalf("failed to build the operator: %v: %s", err, out)
	}
	s, err := RunAPIServer(context.Background(), OperatorOptions{Binary: bin, VMs: 60, Rounds: 1, KillsPerPhase: 1,
		Seed: uint64(time.Now().UnixNano()), WorkDir: t.TempDir(), Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(s.String())
	for _, p := range s.Problems {
		t.Error(p)
	}
	if !s.OK() || s.Cycles != 2 || s.Survived != s.Faults {
		t.Errorf("apiserver soak failed: %s", s)
	}
	if s.Faults == 0 {
		t.Errorf("no kube-apiserver restart landed while a phase was under way: %s", s)
	}
}

// TestAgentShort is the short agent part of make test: two rounds of
// bridge creation and relaying with an agent kill in each.
func TestAgentShort(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	for name, pkg := range map[string]string{"fastpath-agent": "github.com/fastpath-io/fastpath/cmd/fastpath-agent",
		"fastpath": "github.com/fastpath-io/fastpath/cni/cmd/fastpath"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("failed to build %s: %v: %s", name, err, out)
		}
	}
	s, err := RunAgent(context.Background(), AgentOptions{Binary: filepath.Join(dir, "fastpath-agent"), Plugin: filepath.Join(dir, "fastpath"),
		Rounds: 2, Bridges: 2, Seed: uint64(time.Now().UnixNano()), WorkDir: t.TempDir(), Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(s.String())
	for _, p := range s.Problems {
		t.Error(p)
	}
	if !s.OK() || s.Cycles != 2 || s.Survived != s.Faults || s.Faults < 2 {
		t.Errorf("agent soak failed: %s", s)
	}
}
