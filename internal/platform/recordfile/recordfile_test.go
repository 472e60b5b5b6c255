package recordfile_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/platform/recordfile"
)

func TestWriteRemove(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	path := filepath.Join(dir, recordfile.Name("c1", "net1"))
	g.Expect(filepath.Base(path)).To(Equal("c1:net1.json"))
	g.Expect(recordfile.TempPath(path)).To(Equal(filepath.Join(dir, ".tmp-c1:net1.json")))

	// A temporary file a killed writer left is reused.
	g.Expect(os.WriteFile(recordfile.TempPath(path), []byte("a longer half-written record"), 0o600)).To(Succeed())
	g.Expect(recordfile.Write(path, []byte("one\n"))).To(Succeed())
	g.Expect(os.ReadFile(path)).To(Equal([]byte("one\n")))
	g.Expect(recordfile.TempPath(path)).NotTo(BeAnExistingFile())
	st, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	g.Expect(recordfile.Write(path, []byte("two\n"))).To(Succeed())
	g.Expect(os.ReadFile(path)).To(Equal([]byte("two\n")))

	g.Expect(recordfile.Write(filepath.Join(dir, "missing", "x:y.json"), nil)).To(MatchError(os.ErrNotExist))

	g.Expect(os.WriteFile(recordfile.TempPath(path), nil, 0o600)).To(Succeed())
	g.Expect(recordfile.Remove(path)).To(Succeed())
	g.Expect(path).NotTo(BeAnExistingFile())
	g.Expect(recordfile.TempPath(path)).NotTo(BeAnExistingFile())
	g.Expect(recordfile.Remove(path)).To(Succeed(), "a missing record is no error")
}

func TestListAndSweepTemp(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	for _, n := range []string{"b:net1.json", "a1:net1.json", "a:net2.json", "a:net1.json", ".tmp-c:net1.json", "lock", "notes.json"} {
		g.Expect(os.WriteFile(filepath.Join(dir, n), nil, 0o600)).To(Succeed())
	}
	g.Expect(os.Mkdir(filepath.Join(dir, "leases"), 0o700)).To(Succeed())
	g.Expect(os.Mkdir(filepath.Join(dir, "d:net1.json"), 0o700)).To(Succeed())
	g.Expect(os.Symlink("a:net1.json", filepath.Join(dir, "e:net1.json"))).To(Succeed())
	g.Expect(recordfile.List(dir)).To(Equal([]string{"a:net1.json", "a:net2.json", "a1:net1.json", "b:net1.json"}), "by container ID, then ifname")
	g.Expect(recordfile.List(filepath.Join(dir, "missing"))).To(BeEmpty())

	old := filepath.Join(dir, ".tmp-123456")
	g.Expect(os.WriteFile(old, nil, 0o600)).To(Succeed())
	hourAgo := time.Now().Add(-time.Hour)
	g.Expect(os.Chtimes(old, hourAgo, hourAgo)).To(Succeed())
	g.Expect(recordfile.SweepTemp(dir, time.Minute)).To(Equal([]string{".tmp-123456"}))
	g.Expect(recordfile.SweepTemp(dir, 0)).To(Equal([]string{".tmp-c:net1.json"}))
	g.Expect(recordfile.List(dir)).To(Equal([]string{"a:net1.json", "a:net2.json", "a1:net1.json", "b:net1.json"}), "by container ID, then ifname")
	_, err := recordfile.SweepTemp(filepath.Join(dir, "missing"), 0)
	g.Expect(err).To(MatchError(os.ErrNotExist))
}
