package state

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

// TestAttachmentLocks: LockAttachment holds the node lock shared (GC's
// exclusive lock waits) until Unlock, and OpenLocked takes it as asked.
func TestAttachmentLocks(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	probe := func(how int) error {
		f, err := os.Open(filepath.Join(dir, lockFile))
		g.Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		return unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
	}

	l, err := LockAttachment(dir, "c1", "net1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Store.Dir()).To(Equal(dir))
	g.Expect(probe(unix.LOCK_SH)).To(Succeed())
	g.Expect(probe(unix.LOCK_EX)).To(MatchError(unix.EWOULDBLOCK))
	l.Unlock()
	g.Expect(probe(unix.LOCK_EX)).To(Succeed())

	s, node, err := OpenLocked(dir, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Dir()).To(Equal(dir))
	g.Expect(probe(unix.LOCK_SH)).To(MatchError(unix.EWOULDBLOCK))
	node.Unlock()
}
