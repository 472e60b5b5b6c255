package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/vsock/backend"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

const backendUID = 65532

// vhostDeviceVsock is the binary hack/setup.sh builds into bin/.
// TestBackendRunsUnprivilegedAndTheAgentCanLinkItsSockets runs the built
// binary as the chart does: the agent (UID 0 with only NET_ADMIN, NET_RAW
// and FOWNER, the backend's group as a supplementary group: no CAP_CHOWN)
// makes the socket directory root's, in group 65532, mode 0770, also over
// one kubelet made (root's 0755), and cannot without that group; the
// backend runs as 65532:65532 with the real vhost-device-vsock, and a
// client syncs a group. The process and its child hold no capability, the
// vhost-user socket is 0666 and the control socket 0660 in that directory,
// and the agent can hard-link the socket into an allocation directory only
// with CAP_FOWNER (fs.protected_hardlinks). SIGTERM stops the processes and
// removes every socket. Root: it switches users.
func TestBackendRunsUnprivilegedAndTheAgentCanLinkItsSockets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (it runs the backend as user 65532)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux) to act as the agent")
	}
	vhost := testutil.VhostDeviceVsock(t)
	g := NewWithT(t)
	base, err := os.MkdirTemp("", "fastpath-vsock-backend-")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	g.Expect(os.Chmod(base, 0o755)).To(Succeed())
	bin := filepath.Join(base, "fastpath-vsock-backend")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	// The agent's socket directory; 0711 only so that this test's backend,
	// which sees the host's tree, can reach its subdirectory (in the chart it
	// mounts only that).
	vsockDir := filepath.Join(base, "vsock")
	dir := filepath.Join(vsockDir, "backend")
	alloc := filepath.Join(vsockDir, "alloc", "vsock0")
	g.Expect(os.MkdirAll(alloc, 0o755)).To(Succeed())
	g.Expect(os.Chmod(vsockDir, 0o711)).To(Succeed())

	// The agent makes the directory (twice: the second finds it done), and
	// fixes one kubelet made; not without the backend's group.
	asAgentPrepare := func(groups string) ([]byte, error) {
		cmd := exec.Command(setpriv, "--groups", groups, "--inh-caps=-all", "--bounding-set=-all,+net_admin,+net_raw,+fowner",
			os.Args[0], "-test.run=^TestHelperPrepareSocketDir$")
		cmd.Env = append(os.Environ(), prepareDirEnv+"="+dir)
		return cmd.CombinedOutput()
	}
	expectPrepared := func() {
		st, err := os.Stat(dir)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Mode().Perm()).To(Equal(backend.SocketDirMode))
		g.Expect(st.Sys().(*syscall.Stat_t).Uid).To(Equal(uint32(0)))
		g.Expect(st.Sys().(*syscall.Stat_t).Gid).To(Equal(uint32(backendUID)))
	}
	g.Expect(os.Mkdir(dir, 0o755)).To(Succeed()) // as kubelet's DirectoryOrCreate would
	early := exec.Command(bin, "--socket-dir", dir, "--vhost-device-vsock", vhost)
	early.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: backendUID, Gid: backendUID, Groups: []uint32{}}}
	out, err = early.CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "the backend refuses a directory the agent did not make")
	g.Expect(string(out)).To(ContainSubstring("the socket directory " + dir + " is 0:0 with mode -rwxr-xr-x: it must be root's, in this process's group 65532, with mode -rwxrwx---"))
	out, err = asAgentPrepare("1")
	g.Expect(err).To(HaveOccurred(), "chown to a group it is not in needs CAP_CHOWN: %s", out)
	g.Expect(string(out)).To(ContainSubstring("failed to give the socket directory " + dir + " to group 65532"))
	g.Expect(os.Remove(dir)).To(Succeed())
	for range 2 {
		out, err = asAgentPrepare(fmt.Sprint(backendUID))
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		expectPrepared()
	}
	g.Expect(os.Chown(dir, 0, 0)).To(Succeed())
	g.Expect(os.Chmod(dir, 0o755)).To(Succeed())
	out, err = asAgentPrepare(fmt.Sprint(backendUID))
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	expectPrepared()
	entries, err := os.ReadDir(vsockDir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(2), "only alloc and backend: no temporary directory left")

	out, err = exec.Command(bin, "--socket-dir", dir, "--vhost-device-vsock", vhost).CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "never as root")
	g.Expect(string(out)).To(ContainSubstring("refusing to run as root"))

	cmd := exec.Command(bin, "--socket-dir", dir, "--vhost-device-vsock", vhost)
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
	st, err := os.Stat(control)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o660)))
	g.Expect(exec.Command(bin, "--socket-dir", dir, "--probe").Run()).To(Succeed())

	c := backend.NewClient(control)
	vm := backend.VM{Name: "vm-a", CID: 3, Socket: filepath.Join(dir, "a.vhost"), UDSPath: filepath.Join(dir, "a.vsock")}
	grp := backend.Group{Key: "ns/att", VMs: []backend.VM{vm, {Name: "vm-b", CID: 4, Socket: filepath.Join(dir, "b.vhost"), UDSPath: filepath.Join(dir, "b.vsock")}}}
	g.Expect(c.Sync([]backend.Group{{Key: "ns/bad", VMs: []backend.VM{{Name: "x", CID: 3, Socket: filepath.Join(base, "x.vhost"), UDSPath: filepath.Join(dir, "x.vsock")}}}})).
		To(MatchError(ContainSubstring("must be a file directly in " + dir)))
	g.Expect(c.Sync([]backend.Group{grp})).To(Succeed())
	var pid int
	g.Eventually(func() bool {
		_ = c.Sync([]backend.Group{grp})
		s := c.Status()
		if len(s) == 1 && s[0].Running {
			pid = s[0].PID
			return true
		}
		return false
	}, 15*time.Second, 50*time.Millisecond).Should(BeTrue(), func() string { return fmt.Sprintf("%+v\n%s", c.Status(), logs.String()) })
	for _, p := range []int{cmd.Process.Pid, pid} {
		fields := procStatus(t, p)
		g.Expect(fields).To(HaveKeyWithValue("Uid", "65532 65532 65532 65532"), "pid %d", p)
		g.Expect(fields).To(HaveKeyWithValue("Groups", ""), "pid %d", p)
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
			g.Expect(fields).To(HaveKeyWithValue(set, "0000000000000000"), "pid %d %s", p, set)
		}
	}
	st, err = os.Stat(vm.Socket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o666)), "QEMU (user 107) connects through the link")

	// The agent: UID 0, NET_ADMIN and NET_RAW only, the backend's group.
	link := filepath.Join(alloc, "a.vhost")
	asAgent := func(extra string) error {
		return exec.Command(setpriv, "--groups", fmt.Sprint(backendUID), "--inh-caps=-all", "--bounding-set=-all,+net_admin,+net_raw"+extra, "ln", vm.Socket, link).Run()
	}
	g.Expect(asAgent("")).NotTo(Succeed(), "fs.protected_hardlinks: a socket the agent does not own needs CAP_FOWNER")
	g.Expect(asAgent(",+fowner")).To(Succeed())
	linked, err := os.Stat(link)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.SameFile(st, linked)).To(BeTrue())

	g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Eventually(exited, 15*time.Second).Should(Receive(BeNil()), func() string { return logs.String() })
	for _, p := range []string{control, vm.Socket, vm.UDSPath} {
		g.Expect(p).NotTo(BeAnExistingFile())
	}
	_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "vhost-device-vsock pid %d stopped", pid)
}

// prepareDirEnv names the directory TestHelperPrepareSocketDir prepares.
const prepareDirEnv = "FASTPATH_TEST_PREPARE_SOCKET_DIR"

// TestHelperPrepareSocketDir is the agent's backend.PrepareSocketDir for
// TestBackendRunsUnprivilegedAndTheAgentCanLinkItsSockets, which runs the
// test binary through setpriv with the agent's capabilities and groups; it
// skips without $FASTPATH_TEST_PREPARE_SOCKET_DIR.
func TestHelperPrepareSocketDir(t *testing.T) {
	dir := os.Getenv(prepareDirEnv)
	if dir == "" {
		t.Skip("a helper of TestBackendRunsUnprivilegedAndTheAgentCanLinkItsSockets")
	}
	if err := backend.PrepareSocketDir(dir, backendUID); err != nil {
		t.Fatal(err)
	}
}

func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return fields
}
