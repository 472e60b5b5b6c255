package state

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

func TestSaveLoadListDelete(t *testing.T) {
	g := NewWithT(t)
	s, err := New(filepath.Join(t.TempDir(), "nested", "state"))
	g.Expect(err).NotTo(HaveOccurred())

	a := &Attachment{ContainerID: "c1", IfName: "net1", Netns: "/run/netns/x", Network: "fp", Datapath: "OVS",
		Bridge: "fastpath0", HostIfName: "fp0123456789abc", IPAMType: "host-local", NetConf: json.RawMessage(`{"name":"fp"}`)}
	g.Expect(s.Save(a)).To(Succeed())
	g.Expect(a.Created.IsZero()).To(BeFalse())
	g.Expect(s.Save(&Attachment{ContainerID: "c0", IfName: "eth0", Network: "other"})).To(Succeed())

	got, err := s.Load("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.HostIfName).To(Equal("fp0123456789abc"))
	g.Expect(got.NetConf).To(MatchJSON(`{"name":"fp"}`))
	g.Expect(got.Created.Equal(a.Created)).To(BeTrue())

	// Files that are not attachments are ignored; a corrupt one is reported, not fatal.
	g.Expect(os.WriteFile(filepath.Join(s.Dir(), "bad:eth0.json"), []byte("{"), 0o600)).To(Succeed())
	list, err := s.List()
	g.Expect(err).To(MatchError(ContainSubstring("failed to decode state")))
	g.Expect(list).To(HaveLen(2))
	g.Expect(list[0].ContainerID).To(Equal("c0"))
	g.Expect(list[1].ContainerID).To(Equal("c1"))

	g.Expect(s.Delete("c1", "net1")).To(Succeed())
	g.Expect(s.Delete("c1", "net1")).To(Succeed(), "a second delete is not an error")
	_, err = s.Load("c1", "net1")
	g.Expect(err).To(MatchError(fs.ErrNotExist))
}

func TestPathRejectsBadKeys(t *testing.T) {
	g := NewWithT(t)
	s, err := New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	for _, key := range [][2]string{{"../etc", "eth0"}, {"c1", "a/b"}, {"c1", "a:b"}, {"", "eth0"}, {"c1", ""}, {"c1", "averyveryverylongname"}} {
		_, err := s.Path(key[0], key[1])
		g.Expect(err).To(HaveOccurred(), "key %q", key)
	}
	p, err := s.Path("abc-1.2_3", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(filepath.Join(s.Dir(), "abc-1.2_3:net1.json")))
}

func TestLockSharedAndExclusive(t *testing.T) {
	g := NewWithT(t)
	s, err := New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	probe := func(how int) error {
		f, err := os.Open(filepath.Join(s.Dir(), lockFile))
		g.Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		return unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
	}

	l, err := s.Lock(false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(probe(unix.LOCK_SH)).To(Succeed(), "shared holders coexist")
	g.Expect(probe(unix.LOCK_EX)).To(MatchError(unix.EWOULDBLOCK), "an exclusive holder waits for shared ones")
	l.Unlock()

	l, err = s.Lock(true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(probe(unix.LOCK_SH)).To(MatchError(unix.EWOULDBLOCK))
	l.Unlock()
	g.Expect(probe(unix.LOCK_EX)).To(Succeed())
}

// TestTempFiles checks that Save's temporary file is named after the
// attachment, that a stranded one (a Save killed before its rename) is
// neither listed nor kept by Delete, and that SweepTemp removes stranded
// ones by age.
func TestTempFiles(t *testing.T) {
	g := NewWithT(t)
	s, err := New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	stranded := filepath.Join(s.Dir(), TempPrefix+"c1:net1.json")
	g.Expect(os.WriteFile(stranded, []byte(`{"containerID":"c1","ifname":"net1"}`), 0o600)).To(Succeed())
	list, err := s.List()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(BeEmpty(), "a temporary file is not an attachment")

	g.Expect(s.Save(&Attachment{ContainerID: "c1", IfName: "net1"})).To(Succeed())
	g.Expect(stranded).NotTo(BeAnExistingFile(), "Save reuses and renames the attachment's temporary file")
	g.Expect(os.WriteFile(stranded, []byte("{"), 0o600)).To(Succeed())
	g.Expect(s.Delete("c1", "net1")).To(Succeed())
	g.Expect(stranded).NotTo(BeAnExistingFile(), "Delete removes the attachment's temporary file")

	old := filepath.Join(s.Dir(), TempPrefix+"123456")
	young := filepath.Join(s.Dir(), TempPrefix+"c2:net1.json")
	for _, p := range []string{old, young} {
		g.Expect(os.WriteFile(p, nil, 0o600)).To(Succeed())
	}
	past := time.Now().Add(-time.Hour)
	g.Expect(os.Chtimes(old, past, past)).To(Succeed())
	removed, err := s.SweepTemp(time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(ConsistOf(filepath.Base(old)))
	g.Expect(young).To(BeAnExistingFile())
	removed, err = s.SweepTemp(0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(ConsistOf(filepath.Base(young)))
	entries, err := os.ReadDir(s.Dir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty())
}

// TestLockAttachment checks that the attachment lock excludes a second
// holder of the same key (another open of the lock file, as another
// process would) and not one of another key, and that it is independent
// of the node lock.
func TestLockAttachment(t *testing.T) {
	g := NewWithT(t)
	s, err := New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	node, err := s.Lock(false)
	g.Expect(err).NotTo(HaveOccurred())
	defer node.Unlock()
	held, err := s.LockAttachment("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())

	other, err := s.LockAttachment("c2", "net1")
	g.Expect(err).NotTo(HaveOccurred(), "another attachment is not blocked")
	other.Unlock()

	got := make(chan struct{})
	go func() {
		l, err := s.LockAttachment("c1", "net1")
		if err == nil {
			l.Unlock()
		}
		close(got)
	}()
	g.Consistently(got, 200*time.Millisecond).ShouldNot(BeClosed(), "the same attachment waits")
	held.Unlock()
	g.Eventually(got, 5*time.Second).Should(BeClosed())
}

// TestLockOutlivesKilledHolderThroughChild checks what the plugin relies on
// when it is killed while its IPAM plugin runs: a child that inherited the
// lock file keeps the attachment lock until the child exits.
func TestLockOutlivesKilledHolderThroughChild(t *testing.T) {
	g := NewWithT(t)
	s, err := New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	held, err := s.LockAttachment("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	child := exec.Command("sleep", "0.5")
	child.ExtraFiles = []*os.File{held.File()}
	g.Expect(child.Start()).To(Succeed())
	started := time.Now()
	held.Unlock() // as if this process died: only the child holds the file now
	l, err := s.LockAttachment("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	l.Unlock()
	g.Expect(time.Since(started)).To(BeNumerically(">=", 400*time.Millisecond), "the lock was held until the child exited")
	g.Expect(child.Wait()).To(Succeed())
}

// TestCompleteAppends: Complete appends the completed record, which Load and
// List then return; a line cut short (a kill in the middle of the append) or
// one that does not decode does not count; a record in the format of
// earlier plugin versions (one line without a newline) loads; Complete needs
// a record to complete.
func TestCompleteAppends(t *testing.T) {
	g := NewWithT(t)
	s, err := New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	a := &Attachment{ContainerID: "c1", IfName: "net1", Network: "fp", HostIfName: "fp0123456789abc", NetConf: json.RawMessage(`{"name":"fp"}`)}
	g.Expect(s.Save(a)).To(Succeed())
	path, err := s.Path("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	saved, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())

	a.Complete, a.MAC, a.Result = true, "02:00:00:00:00:01", json.RawMessage(`{"cniVersion":"1.0.0"}`)
	g.Expect(s.Complete(a)).To(Succeed())
	got, err := s.Load("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Complete).To(BeTrue())
	g.Expect(got.MAC).To(Equal("02:00:00:00:00:01"))
	g.Expect(got.Result).To(MatchJSON(`{"cniVersion":"1.0.0"}`))
	list, err := s.List()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(HaveLen(1))
	g.Expect(list[0].Complete).To(BeTrue())
	entries, err := os.ReadDir(s.Dir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "no other file")

	completed, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	for name, content := range map[string][]byte{
		"append cut short":          completed[:len(completed)-10],
		"append without newline":    completed[:len(completed)-1],
		"line that does not decode": append(append([]byte{}, saved...), []byte("\x00\x00\x00\n")...),
	} {
		g.Expect(os.WriteFile(path, content, 0o600)).To(Succeed())
		got, err := s.Load("c1", "net1")
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(got.Complete).To(BeFalse(), name)
		g.Expect(got.HostIfName).To(Equal("fp0123456789abc"), name)
	}

	old, err := json.Marshal(a)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(path, old, 0o600)).To(Succeed())
	got, err = s.Load("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Complete).To(BeTrue())

	g.Expect(s.Complete(&Attachment{ContainerID: "c2", IfName: "net1"})).To(MatchError(ContainSubstring("failed to update state")))
}

// TestUpdateAppends: an Update between Save and Complete (ADD's port
// security flag) is a line of its own; the last whole line wins, and a
// torn Complete leaves the update.
func TestUpdateAppends(t *testing.T) {
	g := NewWithT(t)
	s, err := New(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	a := &Attachment{ContainerID: "c1", IfName: "net1", HostIfName: "fp0123456789abc"}
	g.Expect(s.Save(a)).To(Succeed())
	a.PortSecurity = true
	g.Expect(s.Update(a)).To(Succeed())
	got, err := s.Load("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.PortSecurity).To(BeTrue())
	g.Expect(got.Complete).To(BeFalse())
	path, err := s.Path("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	updated, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	a.Complete = true
	g.Expect(s.Complete(a)).To(Succeed())
	completed, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bytes.Count(completed, []byte{'\n'})).To(Equal(3))
	g.Expect(os.WriteFile(path, completed[:len(completed)-1], 0o600)).To(Succeed())
	got, err = s.Load("c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.PortSecurity).To(BeTrue())
	g.Expect(got.Complete).To(BeFalse())
	g.Expect(len(completed)).To(BeNumerically(">", len(updated)))
	entries, err := os.ReadDir(s.Dir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "no other file")
}

// TestIPAMInput: addresses are released with what ADD gave the IPAM plugin;
// a record from before IPAMConf existed used the netconf as it was.
func TestIPAMInput(t *testing.T) {
	g := NewWithT(t)
	legacy := &Attachment{NetConf: []byte(`{"name":"fp-db"}`)}
	g.Expect(legacy.IPAMInput()).To(MatchJSON(`{"name":"fp-db"}`))
	current := &Attachment{NetConf: []byte(`{"name":"fp-a.db"}`), IPAMConf: []byte(`{"name":"fp-a.db","ipam":{"dataDir":"/s/ipam"}}`)}
	g.Expect(current.IPAMInput()).To(MatchJSON(`{"name":"fp-a.db","ipam":{"dataDir":"/s/ipam"}}`))
}
