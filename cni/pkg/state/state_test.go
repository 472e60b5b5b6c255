package state

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

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

	unlock, err := s.Lock(false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(probe(unix.LOCK_SH)).To(Succeed(), "shared holders coexist")
	g.Expect(probe(unix.LOCK_EX)).To(MatchError(unix.EWOULDBLOCK), "an exclusive holder waits for shared ones")
	unlock()

	unlock, err = s.Lock(true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(probe(unix.LOCK_SH)).To(MatchError(unix.EWOULDBLOCK))
	unlock()
	g.Expect(probe(unix.LOCK_EX)).To(Succeed())
}
