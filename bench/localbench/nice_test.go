package localbench

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// SetNice reaches the processes started afterwards and, where the kernel
// has autogroups, the session's group, which restore puts back.
func TestSetNice(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	before, hasAuto, err := autogroupNice(os.Getpid())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	restore, err := SetNice(5)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(strings.TrimSpace(runOut(t, "sh", "-c", "cut -d' ' -f19 /proc/$$/stat"))).To(gomega.Equal("5"))
	if hasAuto {
		n, _, err := autogroupNice(os.Getpid())
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(n).To(gomega.Equal(5))
	}
	g.Expect(restore()).To(gomega.Succeed())
	if hasAuto {
		n, _, err := autogroupNice(os.Getpid())
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(n).To(gomega.Equal(before))
	}
	// Back to niceness 0 for the threads of this test binary.
	restore, err = SetNice(0)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(restore()).To(gomega.Succeed())
}

func runOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("failed to run %s: %v", name, err)
	}
	return string(out)
}

// The text of /proc/<pid>/autogroup: empty means the process is in no
// autogroup (a cgroup with the cpu controller, as in CI containers), which
// SetNice must accept; anything else unexpected is an error.
func TestParseAutogroup(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		nice    int
		ok      bool
		wantErr bool
	}{
		{raw: "/autogroup-534 nice 0\n", nice: 0, ok: true},
		{raw: "/autogroup-7 nice -20\n", nice: -20, ok: true},
		{raw: "", ok: false},
		{raw: "\n", ok: false},
		{raw: "/autogroup-7 nice x\n", wantErr: true},
		{raw: "garbage\n", wantErr: true},
	} {
		nice, ok, err := parseAutogroup(tc.raw)
		if tc.wantErr {
			if err == nil {
				t.Errorf("parseAutogroup(%q): want an error, got nice %d ok %v", tc.raw, nice, ok)
			}
			continue
		}
		if err != nil || nice != tc.nice || ok != tc.ok {
			t.Errorf("parseAutogroup(%q) = %d, %v, %v; want %d, %v, nil", tc.raw, nice, ok, err, tc.nice, tc.ok)
		}
	}
}
