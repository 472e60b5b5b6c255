package sysctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/node/sysctl"
)

// fakeProc writes a /proc/sys-like tree with the given values (kernel
// formatting: tab-separated fields, trailing newline).
func fakeProc(t *testing.T, values map[string]string) string {
	root := t.TempDir()
	for name, v := range values {
		p := filepath.Join(root, strings.ReplaceAll(name, ".", "/"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func read(t *testing.T, root, name string) string {
	b, err := os.ReadFile(filepath.Join(root, strings.ReplaceAll(name, ".", "/")))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Debian bookworm's kernel defaults.
var kernelDefaults = map[string]string{
	"net.core.rmem_max": "212992",
	"net.core.wmem_max": "212992",
	"net.ipv4.tcp_rmem": "4096\t131072\t6291456",
	"net.ipv4.tcp_wmem": "4096\t16384\t4194304",
}

func TestEnsureRaisesPerFieldAndNeverLowers(t *testing.T) {
	g := NewWithT(t)
	values := map[string]string{}
	for k, v := range kernelDefaults {
		values[k] = v
	}
	values["net.core.wmem_max"] = "16777216" // an admin's higher value
	root := fakeProc(t, values)

	got, err := (&sysctl.Tuner{Root: root, Apply: true}).Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]fastpathv1alpha1.SysctlStatus{
		{Name: "net.core.rmem_max", Value: "262144", Applied: true},
		{Name: "net.core.wmem_max", Value: "16777216", Applied: true},
		// tcp_rmem max 6291456 is above 256 KB and stays; the default is raised.
		{Name: "net.ipv4.tcp_rmem", Value: "4096 262144 6291456", Applied: true},
		{Name: "net.ipv4.tcp_wmem", Value: "4096 262144 4194304", Applied: true},
	}))
	g.Expect(read(t, root, "net.core.rmem_max")).To(Equal("262144"))
	g.Expect(read(t, root, "net.core.wmem_max")).To(Equal("16777216"))
	g.Expect(read(t, root, "net.ipv4.tcp_rmem")).To(Equal("4096 262144 6291456"))

	// A second run (or a restarted agent) changes nothing and reports the same.
	again, err := (&sysctl.Tuner{Root: root, Apply: true}).Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(got))
}

func TestEnsureWithoutApplyOnlyReports(t *testing.T) {
	g := NewWithT(t)
	root := fakeProc(t, kernelDefaults)
	got, err := (&sysctl.Tuner{Root: root}).Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]fastpathv1alpha1.SysctlStatus{
		{Name: "net.core.rmem_max", Value: "212992"},
		{Name: "net.core.wmem_max", Value: "212992"},
		{Name: "net.ipv4.tcp_rmem", Value: "4096 131072 6291456"},
		{Name: "net.ipv4.tcp_wmem", Value: "4096 16384 4194304"},
	}))
	g.Expect(read(t, root, "net.core.rmem_max")).To(Equal("212992"))
}

func TestEnsureReportsBrokenSettingsAndHandlesTheRest(t *testing.T) {
	g := NewWithT(t)
	root := fakeProc(t, map[string]string{
		"net.core.rmem_max": "212992",
		"net.core.wmem_max": "lots",
		"net.ipv4.tcp_rmem": "4096 131072", // two fields, not three
	})
	got, err := (&sysctl.Tuner{Root: root, Apply: true}).Ensure()
	g.Expect(err).To(MatchError(And(
		ContainSubstring(`failed to parse sysctl net.core.wmem_max value "lots"`),
		ContainSubstring("failed to parse sysctl net.ipv4.tcp_rmem value \"4096 131072\": 2 fields, want 3"),
		ContainSubstring("failed to read sysctl net.ipv4.tcp_wmem"),
	)))
	g.Expect(got).To(HaveLen(4))
	g.Expect(got[0]).To(Equal(fastpathv1alpha1.SysctlStatus{Name: "net.core.rmem_max", Value: "262144", Applied: true}))
	g.Expect(got[1].Applied).To(BeFalse())
	g.Expect(got[3]).To(Equal(fastpathv1alpha1.SysctlStatus{Name: "net.ipv4.tcp_wmem"}))
}
