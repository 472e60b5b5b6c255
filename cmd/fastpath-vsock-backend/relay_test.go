package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// TestBackendRelayRunsUnprivilegedAndEndsConnectionsOnStop runs the built
// binary as the chart does with the relay on (--relay, no
// vhost-device-vsock), over the UNIX-socket EMULATION of vsock: as user
// 65532 with no capability it serves a route the agent's client sends, its
// limits follow from --memory-limit, its metrics count the relayed bytes on
// GET /metrics of the control socket, and SIGTERM (the pod's deletion)
// ends the relayed connection at once, with EOF, not a hang. Root: it
// switches users.
func TestBackendRelayRunsUnprivilegedAndEndsConnectionsOnStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (it runs the backend as user 65532)")
	}
	g := NewWithT(t)
	base, err := os.MkdirTemp("", "fastpath-vsock-relay-")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	g.Expect(os.Chmod(base, 0o755)).To(Succeed())
	bin := filepath.Join(base, "fastpath-vsock-backend")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	dir := filepath.Join(base, "backend")
	g.Expect(backend.PrepareSocketDir(dir, backendUID)).To(Succeed()) // the agent's step
	// The emulation's root, where the backend (65532) binds the host CID's
	// sockets and the test (root) the guests'.
	emu := filepath.Join(base, "vsock")
	g.Expect(os.Mkdir(emu, 0o777)).To(Succeed())
	g.Expect(os.Chmod(emu, 0o777)).To(Succeed())

	// The target guest: an echo at (100, 5000) the backend's user may dial.
	ln, err := vsock.NewUnixTransport(emu, 100).Listen(5000)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ln.Close() })
	g.Expect(os.Chmod(vsock.NewUnixTransport(emu, 100).SocketPath(100, 5000), 0o777)).To(Succeed())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()

	const memoryLimit = 128 << 20
	cmd := exec.Command(bin, "--socket-dir", dir, "--vhost-device-vsock=", "--relay", "--vsock-transport=unix:"+emu, "--memory-limit=134217728")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: backendUID, Gid: backendUID, Groups: []uint32{}}}
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	g.Expect(cmd.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	control := filepath.Join(dir, backend.ControlSocketName)
	g.Eventually(func() error { _, err := os.Stat(control); return err }, 10*time.Second, 20*time.Millisecond).Should(Succeed(), func() string { return logs.String() })
	fields := procStatus(t, cmd.Process.Pid)
	g.Expect(fields).To(HaveKeyWithValue("Uid", "65532 65532 65532 65532"))
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		g.Expect(fields).To(HaveKeyWithValue(set, "0000000000000000"), set)
	}

	c := backend.NewRelayClient(control, vsock.EmulationNote(vsock.NewUnixTransport(emu, vsock.HostCID)))
	rt := relay.Route{Attachment: types.NamespacedName{Namespace: "ns", Name: "att"}, Service: "echo", ListenPort: 20001,
		TargetCID: 100, TargetPort: 5000, AllowedCIDs: []uint32{101}}
	g.Expect(c.Update([]relay.Route{rt})).To(Succeed(), func() string { return logs.String() })
	g.Expect(c.Listeners()).To(ConsistOf(HaveField("Port", uint32(20001))))
	g.Expect(c.Limits().MaxTotalConns).To(Equal(relay.BudgetsForMemory(memoryLimit).MaxTotalConns), "derived from --memory-limit")

	conn, err := vsock.NewUnixTransport(emu, 101).Dial(context.Background(), vsock.HostCID, 20001)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	g.Expect(conn.SetDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
	_, err = conn.Write([]byte("ping"))
	g.Expect(err).NotTo(HaveOccurred())
	buf := make([]byte, 4)
	_, err = io.ReadFull(conn, buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(buf)).To(Equal("ping"))

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", control)
	}}}
	resp, err := hc.Get("http://backend" + backend.MetricsPath)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(string(body)).To(ContainSubstring(relay.MetricBytes + `{attachment="ns/att",direction="to_target",service="echo"} 4`))
	g.Expect(string(body)).To(ContainSubstring("go_goroutines "))

	g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(conn.SetReadDeadline(time.Now().Add(2 * time.Second))).To(Succeed())
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) {
		g.Expect(ne.Timeout()).To(BeFalse(), "the relayed connection is still open 2 s after SIGTERM")
	}
	g.Eventually(exited, 15*time.Second).Should(Receive(BeNil()), func() string { return logs.String() })
	g.Expect(control).NotTo(BeAnExistingFile())
}
