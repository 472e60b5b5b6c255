package backend

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestAgentRestartKeepsTheBackendProcess runs the real vhost-device-vsock
// under a Supervisor served by a Server, as the backend pod does, and drives
// it from two Clients in turn, as an agent and the agent that replaces it
// after a rollout do: the second agent's Sync of the same groups leaves the
// process (its PID) and its sockets (their inodes) alone. Then the server
// restarts (a new backend pod: a new Supervisor, so new processes), and
// the surviving client sends it the wanted groups again on its own.
func TestAgentRestartKeepsTheBackendProcess(t *testing.T) {
	bin := testutil.VhostDeviceVsock(t)
	g := NewWithT(t)
	dir := t.TempDir()
	sup := &Supervisor{Binary: bin, MinBackoff: 50 * time.Millisecond}
	defer sup.Stop()
	_, stopServer := serve(t, dir, sup)
	socket := filepath.Join(dir, ControlSocketName)
	want := []Group{group(dir, 3, 4)}

	running := func(c *Client) func() (int, error) {
		return func() (int, error) {
			if _, err := c.Report(); err != nil {
				return 0, err
			}
			st := c.Status()
			if len(st) != 1 || !st[0].Running {
				return 0, nil
			}
			return st[0].PID, nil
		}
	}
	agent1 := NewClient(socket)
	agent1.PollInterval = 20 * time.Millisecond
	g.Expect(agent1.Sync(want)).To(Succeed())
	ctx1, stop1 := context.WithCancel(context.Background())
	go func() { _ = agent1.Run(ctx1) }()
	g.Eventually(running(agent1), 15*time.Second, 20*time.Millisecond).ShouldNot(BeZero())
	pid, _ := running(agent1)()
	before, err := os.Stat(want[0].VMs[0].Socket)
	g.Expect(err).NotTo(HaveOccurred())
	stop1() // the old agent is gone

	agent2 := NewClient(socket)
	agent2.PollInterval = 20 * time.Millisecond
	g.Expect(agent2.Sync(want)).To(Succeed())
	g.Expect(running(agent2)()).To(Equal(pid), "the new agent's sync keeps the process")
	g.Consistently(running(agent2), 500*time.Millisecond, 50*time.Millisecond).Should(Equal(pid))
	after, err := os.Stat(want[0].VMs[0].Socket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.SameFile(before, after)).To(BeTrue(), "the socket QEMU holds is the same inode")
	g.Expect(processAlive(pid)).To(BeTrue())

	// The backend pod restarts: its processes die with it, and a new
	// server starts with none.
	ctx2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	go func() { _ = agent2.Run(ctx2) }()
	stopServer()
	sup.Stop()
	g.Eventually(func() bool { return processAlive(pid) }, 5*time.Second).Should(BeFalse())
	sup2 := &Supervisor{Binary: bin, MinBackoff: 50 * time.Millisecond}
	defer sup2.Stop()
	serve(t, dir, sup2)
	g.Eventually(func() []Status { return sup2.Status() }, 15*time.Second, 20*time.Millisecond).Should(
		ConsistOf(And(HaveField("Key", want[0].Key), HaveField("Running", true))), "the client re-synced the new server")
	g.Eventually(running(agent2), 5*time.Second, 20*time.Millisecond).Should(And(Not(BeZero()), Not(Equal(pid))))
}

// processAlive says whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", itoa(uint32(pid)), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ')' {
			return len(s) > i+2 && s[i+2] != 'Z'
		}
	}
	return false
}

// TestSupervisorKeepsAGroupAQEMUIsConnectedTo connects to a VM's vhost-user
// socket of the real vhost-device-vsock, as QEMU does (the vhost-user
// handshake is not needed: the backend accepts first), and changes the
// group: the process stays, pending, until the connection closes, and is
// replaced on the next Sync after that.
func TestSupervisorKeepsAGroupAQEMUIsConnectedTo(t *testing.T) {
	bin := testutil.VhostDeviceVsock(t)
	g := NewWithT(t)
	dir := t.TempDir()
	s := &Supervisor{Binary: bin, MinBackoff: 50 * time.Millisecond}
	defer s.Stop()
	grp := group(dir, 3, 4)
	g.Expect(s.Sync([]Group{grp})).To(Succeed())
	g.Eventually(func() bool { st := s.Status(); return len(st) == 1 && st[0].Running }, 15*time.Second, 20*time.Millisecond).Should(BeTrue())
	pid := s.Status()[0].PID

	conn, err := net.Dial("unix", grp.VMs[0].Socket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string { return grp.VMs[0].Socket }, 5*time.Second, 20*time.Millisecond).ShouldNot(BeAnExistingFile(), "vhost-device-vsock unlinks a socket once it accepted its QEMU")
	g.Expect(s.Sync([]Group{group(dir, 3, 4, 5)})).To(Succeed())
	st := s.Status()[0]
	g.Expect(st.Pending).To(BeTrue(), "%+v", st)
	g.Expect(st.PID).To(Equal(pid))
	g.Expect(st.Message).To(ContainSubstring("1 VMs are connected"))

	g.Expect(conn.Close()).To(Succeed())
	g.Eventually(func() string { return grp.VMs[0].Socket }, 5*time.Second, 20*time.Millisecond).Should(BeAnExistingFile(), "bound again after the disconnect")
	g.Expect(s.Sync([]Group{group(dir, 3, 4, 5)})).To(Succeed())
	g.Eventually(func() Status { return s.Status()[0] }, 15*time.Second, 20*time.Millisecond).Should(And(
		HaveField("Running", true), HaveField("Pending", false), HaveField("Serving", HaveLen(3)), HaveField("PID", Not(Equal(pid)))))
}
