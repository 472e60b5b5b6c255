package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/fastpath-io/fastpath/internal/vm/domainhook"
	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

const testdata = "../../internal/vm/domainhook/testdata"

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatalf("failed to read fixture %s: %v", name, err)
	}
	return string(b)
}

// vmiWithTuning returns the VMI fixture with its tuning annotation replaced.
func vmiWithTuning(t *testing.T, value string) string {
	t.Helper()
	var vmi kubevirtv1.VirtualMachineInstance
	if err := json.Unmarshal([]byte(fixture(t, "vmi.json")), &vmi); err != nil {
		t.Fatalf("failed to decode VMI fixture: %v", err)
	}
	vmi.Annotations[domaintuning.AnnotationKey] = value
	b, err := json.Marshal(&vmi)
	if err != nil {
		t.Fatalf("failed to encode VMI: %v", err)
	}
	return string(b)
}

// wantTuned is the fixture domain with the docs/design.md §3.1 tuning applied by the
// library; the tests below check that the program prints exactly that.
func wantTuned(t *testing.T, vmi, domain string) []byte {
	t.Helper()
	res, err := domainhook.OnDefineDomain([]byte(vmi), []byte(domain))
	if err != nil || !res.Changed() {
		t.Fatalf("fixture tuning does not apply: changed=%v err=%v", res.Changed(), err)
	}
	return res.Domain
}

func TestRun(t *testing.T) {
	vmi, domain := fixture(t, "vmi.json"), fixture(t, "domain-kubevirt.xml")
	tuned := wantTuned(t, vmi, domain)
	badTx := vmiWithTuning(t, `{"interfaces":{"fp-db-link":{"txQueueSize":1024}}}`)
	for _, tc := range []struct {
		name       string
		argv       []string
		wantCode   int
		wantStdout []byte
		wantStderr []string
	}{
		{name: "as onDefineDomain", argv: []string{"/usr/bin/onDefineDomain", "--vmi", vmi, "--domain", domain},
			wantStdout: tuned, wantStderr: []string{`onDefineDomain: "level"=0 "msg"="Tuned domain interface" "alias"="ua-fp-db-link"`, "driver.rx_queue_size=1024"}},
		{name: "own name with the hook point word", argv: []string{"fastpath-domain-hook", "onDefineDomain", "--vmi", vmi, "--domain", domain},
			wantStdout: tuned},
		{name: "own name, single-dash flags", argv: []string{"fastpath-domain-hook", "-vmi", vmi, "-domain", domain},
			wantStdout: tuned},
		{name: "nothing to tune prints the domain as given", argv: []string{"onDefineDomain", "--vmi", vmiWithTuning(t, `{"interfaces":{}}`), "--domain", domain},
			wantStdout: []byte(domain), wantStderr: []string{"Domain unchanged"}},
		{name: "bad tuning prints no domain", argv: []string{"onDefineDomain", "--vmi", badTx, "--domain", domain},
			wantCode: 1, wantStderr: []string{`txQueueSize 1024 is invalid: must be 256 with the vhost driver`, "no domain XML printed"}},
		{name: "bad domain prints no domain", argv: []string{"onDefineDomain", "--vmi", vmi, "--domain", "<domain>"},
			wantCode: 1, wantStderr: []string{"failed to parse domain XML"}},
		{name: "missing --domain", argv: []string{"onDefineDomain", "--vmi", vmi},
			wantCode: 2, wantStderr: []string{"usage: onDefineDomain --vmi <VMI JSON> --domain <domain XML>"}},
		{name: "stray argument", argv: []string{"onDefineDomain", "--vmi", vmi, "--domain", domain, "extra"},
			wantCode: 2, wantStderr: []string{"usage:"}},
		{name: "unknown flag", argv: []string{"onDefineDomain", "--cloud-init", "{}"},
			wantCode: 2, wantStderr: []string{"flag provided but not defined: -cloud-init"}},
		{name: "installed as preCloudInitIso", argv: []string{"/usr/bin/preCloudInitIso", "--vmi", vmi, "--cloud-init", "{}"},
			wantCode: 1, wantStderr: []string{"Only onDefineDomain is implemented"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			var stdout, stderr bytes.Buffer
			code := run(tc.argv, &stdout, &stderr)
			g.Expect(code).To(gomega.Equal(tc.wantCode), "stderr: %s", stderr.String())
			if tc.wantStdout == nil {
				g.Expect(stdout.Len()).To(gomega.BeZero())
			} else {
				g.Expect(stdout.Bytes()).To(gomega.Equal(tc.wantStdout))
			}
			for _, s := range tc.wantStderr {
				g.Expect(stderr.String()).To(gomega.ContainSubstring(s))
			}
		})
	}
}

// buildHook builds this command into dir and returns the binary's path.
func buildHook(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build the hook binary: %v", err)
	}
	bin := filepath.Join(dir, "fastpath-domain-hook")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("failed to build fastpath-domain-hook: %v\n%s", err, out)
	}
	return bin
}

// TestBinaryRunByTheSidecarShim runs the built binary the way KubeVirt's
// sidecar-shim does (cmd/sidecars/sidecar_shim.go, runOnDefineDomain):
// exec.Command("onDefineDomain", "--vmi", vmiJSON, "--domain", domainXML)
// found on $PATH, stdout taken with Output() as the new domain.
func TestBinaryRunByTheSidecarShim(t *testing.T) {
	dir := t.TempDir()
	bin := buildHook(t, dir)
	pathDir := filepath.Join(dir, "usr-bin")
	if err := os.Mkdir(pathDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(pathDir, domainhook.HookName)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", pathDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	vmi, domain := fixture(t, "vmi.json"), fixture(t, "domain-kubevirt.xml")

	t.Run("tunes the domain", func(t *testing.T) {
		g := gomega.NewWithT(t)
		cmd := exec.Command(domainhook.HookName, "--vmi", vmi, "--domain", domain)
		g.Expect(cmd.Path).To(gomega.Equal(filepath.Join(pathDir, domainhook.HookName)))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		g.Expect(err).NotTo(gomega.HaveOccurred(), "stderr: %s", stderr.String())
		g.Expect(out).To(gomega.Equal(wantTuned(t, vmi, domain)))
		g.Expect(string(out)).To(gomega.ContainSubstring(`<driver name="vhost" queues="4" rx_queue_size="1024" tx_queue_size="256">`))
		g.Expect(stderr.String()).To(gomega.HavePrefix("onDefineDomain: "))
		g.Expect(stderr.String()).To(gomega.ContainSubstring(`"alias"="ua-fp-db-link"`))
	})

	t.Run("fails without printing a domain", func(t *testing.T) {
		g := gomega.NewWithT(t)
		cmd := exec.Command(domainhook.HookName, "--vmi", vmiWithTuning(t, `{"interfaces":{"fp-db-link":{"rxQueueSize":128}}}`), "--domain", domain)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var exitErr *exec.ExitError
		g.Expect(errors.As(err, &exitErr)).To(gomega.BeTrue(), "want a non-zero exit, got %v", err)
		g.Expect(exitErr.ExitCode()).To(gomega.Equal(1))
		g.Expect(out).To(gomega.BeEmpty())
		g.Expect(stderr.String()).To(gomega.ContainSubstring(`interfaces[\"fp-db-link\"].rxQueueSize 128 is invalid: must be one of 256, 512, 1024`))
	})

	t.Run("under its own name", func(t *testing.T) {
		g := gomega.NewWithT(t)
		out, err := exec.Command(bin, "--vmi", vmi, "--domain", domain).Output()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(strings.Count(string(out), "rx_queue_size=")).To(gomega.Equal(1))
	})
}
