package kvmprobe_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/e2e/localenv/kvmprobe"
)

const qemu = "qemu-system-x86_64"

// prerequisites returns the repository's guest kernel (make setup), failing
// the test when it or QEMU is missing.
func prerequisites(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath(qemu); err != nil {
		t.Fatalf("%s is part of make setup's guests packages: %v", qemu, err)
	}
	_, file, _, _ := runtime.Caller(0)
	kernel := filepath.Join(filepath.Dir(file), "..", "..", "..", "bin", "guest", "vmlinuz")
	if _, err := os.Stat(kernel); err != nil {
		t.Fatalf("missing the guest kernel: run `make setup`: %v", err)
	}
	return kernel
}

// The probe's kernel boots under TCG wherever QEMU runs: a probe that could
// not see the banner would call every machine KVM-less.
func TestBootsUnderTCG(t *testing.T) {
	kernel := prerequisites(t)
	g := NewWithT(t)
	ok, detail, err := kvmprobe.Boots(context.Background(), qemu, "tcg", kernel, 2*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), detail)
}

// An accelerator QEMU does not have ends QEMU at once: false with QEMU's
// reason, not an error and not the timeout.
func TestUnknownAcceleratorIsFalse(t *testing.T) {
	kernel := prerequisites(t)
	g := NewWithT(t)
	ok, detail, err := kvmprobe.Boots(context.Background(), qemu, "no-such-accel", kernel, 10*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())
	g.Expect(detail).To(ContainSubstring("ended before the kernel printed"), "not the timeout's detail")
	g.Expect(detail).To(ContainSubstring("no-such-accel"))
}
