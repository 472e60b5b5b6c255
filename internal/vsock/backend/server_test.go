package backend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// fakeSupervisor records what it is told and reports every group running.
type fakeSupervisor struct {
	mu     sync.Mutex
	groups []Group
	syncs  int
	err    error
}

func (f *fakeSupervisor) Sync(groups []Group) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups, f.syncs = groups, f.syncs+1
	return f.err
}

func (f *fakeSupervisor) Status() []Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Status
	for i, g := range f.groups {
		out = append(out, Status{Key: g.Key, Running: true, PID: 1000 + i, Serving: sortedVMs(g.VMs)})
	}
	return out
}

func (f *fakeSupervisor) told() (int, []Group) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs, f.groups
}

// serve runs a server of sup on <dir>/control.sock until the test ends or
// the returned stop is called.
func serve(t *testing.T, dir string, sup Syncer) (*Server, func()) {
	t.Helper()
	srv, err := NewServer(sup, "0.3.0")
	if err != nil {
		t.Fatal(err)
	}
	srv.SocketDir = dir
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	path := filepath.Join(dir, ControlSocketName)
	go func() { done <- srv.Serve(ctx, path, 0o660) }()
	NewWithT(t).Eventually(func() error { _, err := os.Stat(path); return err }).WithTimeout(5 * time.Second).Should(Succeed())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv, stop
}

func TestClientSyncsAndReadsTheServer(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	sup := &fakeSupervisor{}
	srv, _ := serve(t, dir, sup)
	st, err := os.Stat(filepath.Join(dir, ControlSocketName))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o660)))

	c := NewClient(filepath.Join(dir, ControlSocketName))
	g.Expect(c.Version()).To(BeEmpty(), "no answer yet")
	want := []Group{group(dir, 3, 4)}
	g.Expect(c.Sync(want)).To(Succeed())
	_, told := sup.told()
	g.Expect(told).To(Equal(want))
	g.Expect(c.Status()).To(Equal([]Status{{Key: "ns1/att-a", Running: true, PID: 1000, Serving: want[0].VMs}}))
	g.Expect(c.Version()).To(Equal("0.3.0"))
	rep, err := c.Report()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.BootID).To(HaveLen(32))
	g.Expect(rep.BootID).To(Equal(srv.BootID()))

	// A socket outside the server's directory is refused and nothing synced.
	bad := group("/elsewhere", 3)
	err = c.Sync([]Group{bad})
	g.Expect(err).To(MatchError(ContainSubstring("must be a file directly in " + dir)))
	g.Expect(err).To(MatchError(ContainSubstring(filepath.Join(dir, ControlSocketName))), "the error names the socket")
	n, _ := sup.told()
	g.Expect(n).To(Equal(1))
	ctl := group(dir, 3)
	ctl.VMs[0].UDSPath = filepath.Join(dir, ControlSocketName)
	g.Expect(c.Sync([]Group{ctl})).To(MatchError(ContainSubstring("other than " + ControlSocketName)))

	// A partial failure is Sync's error; the report after it stands.
	sup.err = errors.New("group x: vms[0].cid 2 must be 3-4294967294")
	err = c.Sync(want)
	g.Expect(err).To(MatchError(ContainSubstring("refused PUT /v1/groups: group x: vms[0].cid 2")))
	g.Expect(c.Status()).To(HaveLen(1))
	g.Expect(c.Status()[0].Running).To(BeTrue())
}

func TestClientWithoutServerSaysWhatIsWrong(t *testing.T) {
	g := NewWithT(t)
	socket := filepath.Join(t.TempDir(), ControlSocketName)
	c := NewClient(socket)
	g.Expect(c.Status()).To(BeEmpty(), "nothing wanted, nothing reported")
	err := c.Sync([]Group{group("/run/fp", 3)})
	g.Expect(err).To(MatchError(ContainSubstring("the vsock backend at " + socket + " is unreachable")))
	st := c.Status()
	g.Expect(st).To(HaveLen(1))
	g.Expect(st[0].Key).To(Equal("ns1/att-a"))
	g.Expect(st[0].Running).To(BeFalse())
	g.Expect(st[0].Message).To(ContainSubstring(socket))
	g.Expect(c.Version()).To(BeEmpty())
}

// A backend pod that restarts comes back with a new boot ID and no groups:
// the client's poll sends it the wanted groups again and says so.
func TestClientResyncsARestartedServer(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	sup1 := &fakeSupervisor{}
	_, stop1 := serve(t, dir, sup1)
	c := NewClient(filepath.Join(dir, ControlSocketName))
	c.PollInterval = 20 * time.Millisecond
	var changes atomic.Int32
	c.OnChange = func() { changes.Add(1) }
	want := []Group{group(dir, 3, 4)}
	g.Expect(c.Sync(want)).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	defer func() { cancel(); g.Expect(<-ran).To(Succeed()) }()
	_, _ = c.Report()
	first, _ := c.Report()

	stop1()
	g.Eventually(func() []Status { return c.Status() }).Should(ConsistOf(HaveField("Message", ContainSubstring("unreachable"))))
	seen := changes.Load()
	g.Expect(seen).To(BeNumerically(">=", 1), "losing the server is a change")

	sup2 := &fakeSupervisor{}
	srv2, _ := serve(t, dir, sup2)
	g.Expect(srv2.BootID()).NotTo(Equal(first.BootID))
	g.Eventually(func() []Group { _, gs := sup2.told(); return gs }).WithTimeout(5 * time.Second).Should(Equal(want))
	g.Eventually(func() []Status { return c.Status() }).Should(ConsistOf(HaveField("Running", BeTrue())))
	g.Expect(changes.Load()).To(BeNumerically(">", seen), "the server's return is a change")
}
