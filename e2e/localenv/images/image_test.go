package images

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is what a test compares of a tar header.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	Link     string
	Data     string
}

func readTar(t *testing.T, r io.Reader) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", hdr.Name, err)
		}
		out = append(out, entry{hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Linkname, string(b)})
	}
}

func TestTarAddsParentsSortsAndIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	src := filepath.Join(t.TempDir(), "bin")
	g.Expect(os.WriteFile(src, []byte("ELF"), 0o600)).To(Succeed())
	files := []File{
		Copy(src, "/usr/local/bin/x", 0o755),
		Content("etc/passwd", 0o644, []byte("root:x:0:0::/root:/sbin/nologin\n")),
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Path: "/home/nonroot", Mode: fs.ModeDir | 0o700, UID: 65532, GID: 65532},
		{Path: "/lib64/ld.so", Mode: fs.ModeSymlink | 0o777, Link: "/lib/x86_64-linux-gnu/ld.so"},
		Dir("/usr", 0o755), // given twice as a directory: fine
	}
	var a, b bytes.Buffer
	g.Expect(Tar(&a, files)).To(Succeed())
	g.Expect(Tar(&b, append([]File{files[3]}, files...)[1:])).To(Succeed())
	g.Expect(a.Bytes()).To(Equal(b.Bytes()), "same files, same bytes")

	got := readTar(t, &a)
	g.Expect(got).To(Equal([]entry{
		{"etc/", tar.TypeDir, 0o755, 0, 0, "", ""},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0, "", "root:x:0:0::/root:/sbin/nologin\n"},
		{"home/", tar.TypeDir, 0o755, 0, 0, "", ""},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532, "", ""},
		{"lib64/", tar.TypeDir, 0o755, 0, 0, "", ""},
		{"lib64/ld.so", tar.TypeSymlink, 0o777, 0, 0, "/lib/x86_64-linux-gnu/ld.so", ""},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0, "", ""},
		{"usr/", tar.TypeDir, 0o755, 0, 0, "", ""},
		{"usr/local/", tar.TypeDir, 0o755, 0, 0, "", ""},
		{"usr/local/bin/", tar.TypeDir, 0o755, 0, 0, "", ""},
		{"usr/local/bin/x", tar.TypeReg, 0o755, 0, 0, "", "ELF"},
	}))
}

func TestTarRejectsAFileGivenTwice(t *testing.T) {
	g := NewWithT(t)
	err := Tar(io.Discard, []File{Content("/a", 0o644, nil), Content("/a", 0o600, nil)})
	g.Expect(err).To(MatchError(ContainSubstring("/a: given twice")))
	err = Tar(io.Discard, []File{Copy("/nonexistent/fastpath", "/a", 0o755)})
	g.Expect(err).To(MatchError(ContainSubstring("failed to read /nonexistent/fastpath for /a")))
}

func TestArchiveRoundTripCarriesPlatformConfigAndLayers(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	l1, err := Layer([]File{Content("/etc/group", 0o644, []byte("root:x:0:\n"))})
	g.Expect(err).NotTo(HaveOccurred())
	l2, err := Layer([]File{Content("/usr/local/bin/app", 0o755, []byte("#!app"))})
	g.Expect(err).NotTo(HaveOccurred())
	img, err := Image([]LayerSpec{{l1, "base"}, {l2, "binaries"}}, Config{
		Entrypoint: []string{"/usr/local/bin/app"}, User: "65532:65532", Env: []string{"PATH=" + Path},
	})
	g.Expect(err).NotTo(HaveOccurred())
	archive := filepath.Join(dir, "app.tar")
	g.Expect(WriteArchive(archive, "localhost/app:local", img)).To(Succeed())

	got, err := ReadArchive(archive, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HaveLen(1))
	g.Expect(got[0].Ref).To(Equal("localhost/app:local"))
	g.Expect(got[0].Platform).NotTo(BeNil())
	g.Expect(*got[0].Platform).To(Equal(Platform))

	cf, err := got[0].Image.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cf.OS).To(Equal("linux"))
	g.Expect(cf.Architecture).To(Equal("amd64"))
	g.Expect(cf.Config.Entrypoint).To(Equal([]string{"/usr/local/bin/app"}))
	g.Expect(cf.Config.User).To(Equal("65532:65532"))
	g.Expect(cf.History).To(HaveLen(2))
	g.Expect(cf.History[1].CreatedBy).To(Equal("binaries"))
	g.Expect(cf.Created.Time).To(BeTemporally("==", Epoch))
	mt, err := got[0].Image.MediaType()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mt).To(Equal(types.OCIManifestSchema1))

	layers, err := got[0].Image.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(2))
	for _, l := range layers {
		lmt, err := l.MediaType()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lmt).To(Equal(types.OCILayer))
	}
	flat := readTar(t, mutate.Extract(got[0].Image))
	g.Expect(flat).To(ContainElement(entry{"usr/local/bin/app", tar.TypeReg, 0o755, 0, 0, "", "#!app"}))
	g.Expect(flat).To(ContainElement(entry{"etc/group", tar.TypeReg, 0o644, 0, 0, "", "root:x:0:\n"}))

	// Writing the same image again gives the same archive bytes.
	a, err := os.ReadFile(archive)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(WriteArchive(archive, "localhost/app:local", img)).To(Succeed())
	b, err := os.ReadFile(archive)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(Equal(b))
}

func TestSelectRejectsUnknownImages(t *testing.T) {
	g := NewWithT(t)
	_, err := Select(repoRoot(t), "operator", "web")
	g.Expect(err).To(MatchError(`unknown image "web": want one of pause, operator, agent, bench, domain-hook, vsock-backend, virt-operator, virt-api, virt-controller, virt-handler, virt-launcher, guest-kernel-boot`))
	ts, err := Select(repoRoot(t), "bench", "pause")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{ts[0].Name, ts[1].Name}).To(Equal([]string{"pause", "bench"}))
}

func TestDroppedKeepsCopyrightOnly(t *testing.T) {
	g := NewWithT(t)
	for p, want := range map[string]bool{
		"/usr/share/man/man1/ssh.1.gz":                true,
		"/usr/share/doc/openssh-client/changelog.gz":  true,
		"/usr/share/doc/openssh-client/copyright":     false,
		"/usr/share/doc/libkrb5-3":                    false, // a symlink to another package's docs
		"/usr/share/lintian/overrides/openssh-client": true,
		"/usr/bin/ssh": false,
		"/usr/share/ca-certificates/mozilla/ISRG.crt":    false,
		"/usr/share/doc/ca-certificates/README.Debian":   true,
		"/usr/share/info/dir":                            true,
		"/usr/lib/x86_64-linux-gnu/libfido2.so.1.12.0":   false,
		"/usr/share/doc-base/openssh-client-ssh-faq.txt": false,
	} {
		g.Expect(dropped(p)).To(Equal(want), p)
	}
}
