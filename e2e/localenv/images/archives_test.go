package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Building every image takes seconds warm (Go's build cache, the .deb cache
// under _out/images/cache) and a few minutes cold (the sidecar-shim's module,
// the Debian downloads). The tests build once into a temporary directory,
// sharing the repository's cache, and never touch _out/images/*.tar.
var (
	buildOnce    sync.Once
	builtDir     string
	builtResults []Result
	buildErr     error
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// buildAll builds every target once per test binary and returns the results.
func buildAll(t *testing.T) []Result {
	t.Helper()
	for _, tool := range []string{"gcc", "apt-get", "apt-cache", "dpkg-deb", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("make images needs %s (hack/setup.sh installs it): %v", tool, err)
		}
	}
	buildOnce.Do(func() {
		root := repoRoot(t)
		builtDir, buildErr = os.MkdirTemp("", "fastpath-images-test-")
		if buildErr != nil {
			return
		}
		b := &Builder{Root: root, Out: builtDir, Cache: filepath.Join(root, "_out", "images", "cache"), Log: testWriter{t}}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		builtResults, buildErr = b.Build(ctx)
	})
	if buildErr != nil {
		t.Fatalf("build the images: %v", buildErr)
	}
	return builtResults
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fsEntry is one file of an image's flattened filesystem.
type fsEntry struct {
	hdr  *tar.Header
	data []byte
}

func flatten(t *testing.T, r io.Reader) map[string]fsEntry {
	t.Helper()
	out := map[string]fsEntry{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read image filesystem: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[path.Clean("/"+hdr.Name)] = fsEntry{hdr, b}
	}
}

// Every archive holds one image named Ref for linux/amd64 (in its config and
// in its index entry), with its Target's entrypoint and user, OCI media types,
// every binary at its path, and, on a base, the nonroot user, /tmp and a
// parseable CA bundle; every ELF file's libraries resolve inside the image.
func TestBuiltImagesHoldWhatTheirTargetsSay(t *testing.T) {
	results := buildAll(t)
	g := NewWithT(t)
	all, err := Targets(repoRoot(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(results).To(HaveLen(len(all)))
	for _, r := range results {
		t.Run(r.Target.Name, func(t *testing.T) {
			g := NewWithT(t)
			tg := r.Target
			g.Expect(r.Skipped).To(BeEmpty(), "every image builds here, including the sidecar-shim")
			imgs, err := ReadArchive(r.Archive, t.TempDir())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(imgs).To(HaveLen(1))
			a := imgs[0]
			g.Expect(a.Ref).To(Equal(tg.Ref))
			g.Expect(a.Platform).NotTo(BeNil())
			g.Expect(*a.Platform).To(Equal(Platform))

			cf, err := a.Image.ConfigFile()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cf.OS + "/" + cf.Architecture).To(Equal("linux/amd64"))
			g.Expect(cf.Config.Entrypoint).To(Equal(tg.Entrypoint))
			g.Expect(cf.Config.User).To(Equal(tg.ConfigUser()))
			mt, err := a.Image.MediaType()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mt).To(Equal(types.OCIManifestSchema1))
			layers, err := a.Image.Layers()
			g.Expect(err).NotTo(HaveOccurred())
			var compressed int64
			for _, l := range layers {
				lmt, err := l.MediaType()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(lmt).To(Equal(types.OCILayer))
				n, err := l.Size()
				g.Expect(err).NotTo(HaveOccurred())
				compressed += n
			}
			fs := flatten(t, mutate.Extract(a.Image))
			var files int
			var unpacked int64
			for _, e := range fs {
				if e.hdr.Typeflag == tar.TypeReg {
					files++
					unpacked += e.hdr.Size
				}
			}
			t.Logf("%s: archive %s, %d layers, %s compressed, %d files, %s unpacked",
				tg.Ref, human(r.Size), len(layers), human(compressed), files, human(unpacked))

			for _, bin := range tg.Binaries {
				e, ok := fs[bin.Path]
				g.Expect(ok).To(BeTrue(), "%s in the image", bin.Path)
				g.Expect(e.hdr.Typeflag).To(Equal(byte(tar.TypeReg)))
				g.Expect(e.hdr.Mode).To(Equal(int64(0o755)))
				want, err := os.ReadFile(filepath.Join(repoRoot(t), "_out", "images", "cache", "bin", bin.Name))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(bytes.Equal(e.data, want)).To(BeTrue(), "%s is the built %s", bin.Path, bin.Name)
			}
			if tg.Base.Name == baseScratch.Name {
				g.Expect(fs).To(HaveLen(1), "pause is one file, as upstream's")
				g.Expect(cf.Config.Env).To(BeEmpty())
				return
			}
			g.Expect(cf.Config.Env).To(ContainElements("PATH="+Path, "SSL_CERT_FILE="+CACertFile))
			g.Expect(string(fs["/etc/passwd"].data)).To(ContainSubstring("nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
			g.Expect(string(fs["/etc/group"].data)).To(ContainSubstring("nonroot:x:65532:\n"))
			g.Expect(fs["/tmp"].hdr.Mode).To(Equal(int64(0o1777)))
			g.Expect(fs["/home/nonroot"].hdr.Uid).To(Equal(NonrootUID))
			pool := x509.NewCertPool()
			g.Expect(pool.AppendCertsFromPEM(fs[CACertFile].data)).To(BeTrue())
			g.Expect(strings.Count(string(fs[CACertFile].data), "BEGIN CERTIFICATE")).To(BeNumerically(">", 100))
			if tg.Base.Name == baseSidecarShim.Name {
				g.Expect(fs).To(HaveKey(SidecarShimPath))
				g.Expect(string(fs["/etc/passwd"].data)).To(ContainSubstring("nonroot-user:x:1001:1001:"))
			}
			if tg.Base.Name == baseBench.Name {
				for _, p := range []string{"/usr/bin/netperf", "/usr/bin/netserver", "/usr/bin/ssh", "/etc/ssh/ssh_config"} {
					g.Expect(fs).To(HaveKey(p))
				}
				g.Expect(fs).NotTo(HaveKey("/usr/sbin/adduser"), "maintainer-script packages are left out")
				g.Expect(fs).NotTo(HaveKey("/usr/share/man/man1/ssh.1.gz"))
				g.Expect(fs).To(HaveKey("/var/lib/dpkg/status.d/netperf"))
			}
			g.Expect(unresolvedLibraries(t, fs)).To(BeEmpty())
		})
	}
}

// unresolvedLibraries returns "<file>: <library>" for every DT_NEEDED or
// PT_INTERP of an ELF file in fs that fs does not have (following symlinks).
func unresolvedLibraries(t *testing.T, fs map[string]fsEntry) []string {
	t.Helper()
	resolve := func(p string) bool {
		for i := 0; i < 10; i++ {
			e, ok := fs[p]
			if !ok {
				return false
			}
			if e.hdr.Typeflag != tar.TypeSymlink {
				return true
			}
			if strings.HasPrefix(e.hdr.Linkname, "/") {
				p = path.Clean(e.hdr.Linkname)
			} else {
				p = path.Join(path.Dir(p), e.hdr.Linkname)
			}
		}
		return false
	}
	var out []string
	for p, e := range fs {
		if e.hdr.Typeflag != tar.TypeReg {
			continue
		}
		info, err := readELFFrom(bytes.NewReader(e.data))
		if err != nil {
			t.Fatalf("read ELF %s: %v", p, err)
		}
		if info.interp != "" && !resolve(info.interp) {
			out = append(out, p+": "+info.interp)
		}
		for _, lib := range info.needed {
			dirs := append([]string{}, libDirs...)
			for _, rp := range info.runpath {
				dirs = append(dirs, path.Clean(strings.ReplaceAll(rp, "$ORIGIN", path.Dir(p))))
			}
			found := false
			for _, d := range dirs {
				found = found || resolve(path.Join(d, lib))
			}
			if !found {
				out = append(out, p+": "+lib)
			}
		}
	}
	return out
}

// A second build with unchanged inputs keeps every archive.
func TestRebuildWithUnchangedInputsKeepsTheArchives(t *testing.T) {
	first := buildAll(t)
	g := NewWithT(t)
	root := repoRoot(t)
	b := &Builder{Root: root, Out: builtDir, Cache: filepath.Join(root, "_out", "images", "cache")}
	again, err := b.Build(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	for i, r := range again {
		g.Expect(r.Cached).To(BeTrue(), r.Target.Name)
		g.Expect(r.Size).To(Equal(first[i].Size), r.Target.Name)
	}
}
