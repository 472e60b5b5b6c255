// Package kvmprobe tells whether KVM can boot a Linux guest on this
// machine, by booting one. Neither /dev/kvm existing nor real-mode code
// running is enough: on the development machines QEMU opens /dev/kvm and
// SeaBIOS runs a boot sector under it, then a Linux kernel stops at once
// ("failed to set MSR 0x10a", an assertion in QEMU's kvm_buf_set_msrs)
// before it prints a line. The cluster's KubeVirt CR sets useEmulation from
// this probe.
package kvmprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"
)

// Marker is what a Linux kernel prints first on its console (printk of
// linux_banner, init/main.c): once it is on the serial port the kernel runs
// under the accelerator.
const Marker = "Linux version "

// Boots starts qemu with the given accelerator ("kvm" or "tcg") on kernel
// (a bzImage, e.g. the repository's bin/guest/vmlinuz) with console=ttyS0
// and no root file system, and reports whether Marker arrived on the serial
// port within timeout; QEMU is killed either way. detail says what was seen.
// An error means the probe itself could not run (no qemu, a cancelled ctx),
// not that the guest did not boot: a QEMU that exits or aborts first is
// false with its last message in detail.
func Boots(ctx context.Context, qemu, accel, kernel string, timeout time.Duration) (ok bool, detail string, err error) {
	if _, err := exec.LookPath(qemu); err != nil {
		return false, "", fmt.Errorf("failed to find %s for the KVM probe: %w", qemu, err)
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, qemu, "-accel", accel, "-machine", "q35", "-m", "256",
		"-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio",
		"-kernel", kernel, "-append", "console=ttyS0 panic=-1")
	out := &markerWriter{seen: make(chan struct{})}
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return false, "", fmt.Errorf("failed to start %s: %w", qemu, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-out.seen:
		_ = cmd.Process.Kill()
		<-exited
		return true, fmt.Sprintf("a Linux guest printed its banner under %s", accel), nil
	case err := <-exited:
		if errors.Is(ctx.Err(), context.Canceled) {
			return false, "", ctx.Err()
		}
		if tctx.Err() != nil {
			return false, fmt.Sprintf("a Linux guest printed nothing under %s within %s", accel, timeout), nil
		}
		return false, fmt.Sprintf("qemu -accel %s ended before the kernel printed: %v: %s", accel, err, lastLine(stderr.Bytes())), nil
	}
}

func lastLine(b []byte) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return string(lines[len(lines)-1])
}

// markerWriter closes seen once Marker has been written to it, across
// writes.
type markerWriter struct {
	mu   sync.Mutex
	buf  []byte
	once sync.Once
	seen chan struct{}
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if bytes.Contains(w.buf, []byte(Marker)) {
		w.once.Do(func() { close(w.seen) })
	}
	if len(w.buf) > 4*len(Marker) { // keep the tail a split marker needs
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-len(Marker):]...)
	}
	return len(p), nil
}
