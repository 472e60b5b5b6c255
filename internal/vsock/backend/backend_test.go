package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

func group(dir string, cids ...uint32) Group {
	g := Group{Key: "ns1/att-a"}
	for _, cid := range cids {
		g.VMs = append(g.VMs, VM{Name: fmt.Sprintf("vm-%d", cid), CID: cid,
			Socket: filepath.Join(dir, fmt.Sprintf("%d.vhost", cid)), UDSPath: filepath.Join(dir, fmt.Sprintf("%d.vsock", cid))})
	}
	return g
}

func TestArgsNeverForwardToHostVsock(t *testing.T) {
	g := NewWithT(t)
	args := Args(group("/run/fp", 4, 3))
	g.Expect(args).To(Equal([]string{
		"--vm", "guest-cid=3,socket=/run/fp/3.vhost,uds-path=/run/fp/3.vsock,groups=ns1.att-a",
		"--vm", "guest-cid=4,socket=/run/fp/4.vhost,uds-path=/run/fp/4.vsock,groups=ns1.att-a",
	}))
	for _, a := range args {
		g.Expect(a).NotTo(ContainSubstring("forward-cid"))
		g.Expect(a).NotTo(ContainSubstring("forward-listen"))
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Group)
		want   string
	}{
		"cid below 3":   {func(g *Group) { g.VMs[0].CID = 2 }, "vms[0].cid 2 must be 3-4294967294"},
		"cid twice":     {func(g *Group) { g.VMs[1].CID = 3 }, "vms[1].cid 3 is used twice"},
		"relative path": {func(g *Group) { g.VMs[0].Socket = "x.vhost" }, "vms[0].socket \"x.vhost\" must be an absolute path"},
		"long path":     {func(g *Group) { g.VMs[1].UDSPath = "/" + strings.Repeat("a", 120) }, "vms[1].udsPath"},
		"comma in key":  {func(g *Group) { g.Key = "a,b" }, "group key \"a,b\""},
		"no vms":        {func(g *Group) { g.VMs = nil }, "vms must not be empty"},
	} {
		t.Run(name, func(t *testing.T) {
			g := group("/run/fp", 3, 4)
			tc.mutate(&g)
			NewWithT(t).Expect(g.Validate()).To(MatchError(ContainSubstring(tc.want)))
		})
	}
	NewWithT(t).Expect(group("/run/fp", 3, 4).Validate()).To(Succeed())
}

func TestConnectedSocketsCountsPathsWithAPeer(t *testing.T) {
	g := NewWithT(t)
	f := filepath.Join(t.TempDir(), "unix")
	g.Expect(os.WriteFile(f, []byte(`Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 100 /run/fp/3.vhost
0000000000000000: 00000003 00000000 00000000 0001 03 101 /run/fp/3.vhost
0000000000000000: 00000002 00000000 00010000 0001 01 102 /run/fp/4.vhost
0000000000000000: 00000003 00000000 00000000 0001 03 103
`), 0o600)).To(Succeed())
	n, err := connectedSockets(f, []string{"/run/fp/3.vhost", "/run/fp/4.vhost", "/run/fp/5.vhost"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
}

func TestVersionOfTheRealBinary(t *testing.T) {
	v, err := Version(context.Background(), testutil.VhostDeviceVsock(t))
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal("0.3.0"))
}

// TestSupervisorRestartsAKilledBackend runs the real vhost-device-vsock for a
// two-VM group, kills it, and expects a new process serving both sockets,
// reported with one restart.
func TestSupervisorRestartsAKilledBackend(t *testing.T) {
	bin := testutil.VhostDeviceVsock(t)
	g := NewWithT(t)
	dir := t.TempDir()
	changes := make(chan struct{}, 64)
	s := &Supervisor{Binary: bin, LogDir: dir, MinBackoff: 50 * time.Millisecond,
		OnChange: func() { changes <- struct{}{} }}
	defer s.Stop()
	grp := group(dir, 3, 4)
	g.Expect(s.Sync([]Group{grp})).To(Succeed())

	var first int
	var firstStarted time.Time
	g.Eventually(func() bool {
		st := s.Status()
		if len(st) == 1 && st[0].Running {
			first, firstStarted = st[0].PID, st[0].Started
			return true
		}
		return false
	}, 15*time.Second, 50*time.Millisecond).Should(BeTrue())
	for _, vm := range grp.VMs {
		g.Expect(vm.Socket).To(BeAnExistingFile())
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", first))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(cmdline)).NotTo(ContainSubstring("forward"))
	g.Expect(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")[1:]).To(Equal(Args(grp)))

	g.Expect(syscall.Kill(first, syscall.SIGKILL)).To(Succeed())
	g.Eventually(func() Status {
		return s.Status()[0]
	}, 15*time.Second, 50*time.Millisecond).Should(And(
		HaveField("Running", true), HaveField("Restarts", int32(1)),
		HaveField("PID", Not(Equal(first))), HaveField("Started", BeTemporally(">", firstStarted))))
	g.Expect(firstStarted).NotTo(BeZero(), "when the process started: the sibling mounts compare it with QEMU's start")
	g.Expect(changes).NotTo(BeEmpty())
	for _, vm := range grp.VMs {
		g.Expect(vm.Socket).To(BeAnExistingFile())
	}

	// A changed group with no QEMU connected is replaced at once.
	g.Expect(s.Sync([]Group{group(dir, 3, 4, 5)})).To(Succeed())
	g.Eventually(func() Status { return s.Status()[0] }, 15*time.Second, 50*time.Millisecond).Should(And(
		HaveField("Running", true), HaveField("Serving", HaveLen(3)), HaveField("Pending", false)))

	s.Stop()
	g.Expect(s.Status()).To(BeEmpty())
	g.Expect(filepath.Join(dir, "3.vhost")).NotTo(BeAnExistingFile())
}

// TestSupervisorDropsPrivileges runs the real vhost-device-vsock as an
// unprivileged user: the process has that UID and GID, no supplementary
// group and no capability left (permitted, effective, inheritable, ambient),
// and still serves its sockets. Root: it switches users.
func TestSupervisorDropsPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SETUID, CAP_SETGID)")
	}
	bin := testutil.VhostDeviceVsock(t)
	g := NewWithT(t)
	const uid, gid = 64123, 64124
	dir := t.TempDir()
	sockets := filepath.Join(dir, "sockets")
	g.Expect(os.Mkdir(sockets, 0o700)).To(Succeed())
	g.Expect(os.Chown(sockets, uid, gid)).To(Succeed())
	// The sockets must be reachable for the user: t.TempDir's directories are 0700.
	g.Expect(os.Chmod(dir, 0o711)).To(Succeed())
	g.Expect(os.Chmod(filepath.Dir(dir), 0o711)).To(Succeed())
	s := &Supervisor{Binary: bin, MinBackoff: 50 * time.Millisecond, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	defer s.Stop()
	grp := group(sockets, 3, 4)
	g.Expect(s.Sync([]Group{grp})).To(Succeed())
	var pid int
	g.Eventually(func() bool {
		st := s.Status()
		if len(st) == 1 && st[0].Running {
			pid = st[0].PID
			return true
		}
		return false
	}, 15*time.Second, 50*time.Millisecond).Should(BeTrue(), "%+v", s.Status())

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	g.Expect(err).NotTo(HaveOccurred())
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	g.Expect(fields).To(HaveKeyWithValue("Uid", "64123 64123 64123 64123"))
	g.Expect(fields).To(HaveKeyWithValue("Gid", "64124 64124 64124 64124"))
	g.Expect(fields).To(HaveKeyWithValue("Groups", ""))
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		g.Expect(fields).To(HaveKeyWithValue(set, "0000000000000000"), set)
	}
	for _, vm := range grp.VMs {
		st, err := os.Stat(vm.Socket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Sys().(*syscall.Stat_t).Uid).To(Equal(uint32(uid)), "the backend made %s", vm.Socket)
	}
}
