package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// unpack writes the flattened filesystem of the image in archive into dir
// (as root: owners and modes kept).
func unpack(t *testing.T, archive, dir string) {
	t.Helper()
	imgs, err := ReadArchive(archive, t.TempDir())
	if err != nil || len(imgs) != 1 {
		t.Fatalf("read %s: %v (%d images)", archive, err, len(imgs))
	}
	rc := mutate.Extract(imgs[0].Image)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, p)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
				_, err = io.Copy(f, tr)
				f.Close()
			}
		default:
			t.Fatalf("%s: unexpected tar type %c", hdr.Name, hdr.Typeflag)
		}
		if err == nil {
			err = os.Lchown(p, hdr.Uid, hdr.Gid)
		}
		if err == nil && hdr.Typeflag != tar.TypeSymlink {
			err = os.Chmod(p, os.FileMode(hdr.Mode&0o777)|modeBits(hdr.Mode))
		}
		if err != nil {
			t.Fatalf("unpack %s: %v", hdr.Name, err)
		}
	}
}

func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	return out
}

// inImage runs argv chrooted into rootfs as uid:gid, as the image's
// entrypoint would run (no namespaces: only the filesystem is the image's).
func inImage(t *testing.T, rootfs string, uid, gid uint32, argv ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Path = argv[0]
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + Path, "HOME=/home/nonroot"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The programs in the images run from the images' own files: the bench
// image's netperf, netserver and ssh and the agent image's vhost-device-vsock
// find their libraries (no ld.so.cache) and ssh finds the nonroot user it runs
// as; pause and the Go binaries start.
func TestImagesProgramsRunFromTheirOwnFiles(t *testing.T) {
	testutil.RequireRoot(t)
	results := buildAll(t)
	for _, r := range results {
		t.Run(r.Target.Name, func(t *testing.T) {
			g := NewWithT(t)
			rootfs := t.TempDir()
			unpack(t, r.Archive, rootfs)
			// The container runtime gives a container /dev; a chroot needs /dev/null
			// made (ssh opens it).
			g.Expect(os.MkdirAll(filepath.Join(rootfs, "dev"), 0o755)).To(Succeed())
			g.Expect(syscall.Mknod(filepath.Join(rootfs, "dev", "null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))).To(Succeed())
			g.Expect(os.Chmod(filepath.Join(rootfs, "dev", "null"), 0o666)).To(Succeed()) // past the umask
			uid, gid := uint32(0), uint32(0)
			if u := r.Target.ConfigUser(); u != "" {
				_, err := fmt.Sscanf(strings.Replace(u+":"+u, ":", " ", 2), "%d %d", &uid, &gid)
				g.Expect(err).NotTo(HaveOccurred(), "user %q", u)
			}
			type run struct {
				argv []string
				want string
			}
			var runs []run
			switch r.Target.Name {
			case "pause":
				runs = []run{{[]string{"/pause", "-v"}, "pause.c v" + PauseVersion}}
			case "bench":
				runs = []run{
					{[]string{"/usr/bin/netperf", "-V"}, "Netperf version 2.7.0"},
					{[]string{"/usr/bin/netserver", "-V"}, "Netperf version 2.7.0"},
					// -G prints the configuration after ssh has looked up the user it runs as.
					{[]string{"/usr/bin/ssh", "-G", "-o", "BatchMode=yes", "vm.example"}, "user nonroot"},
					{[]string{"/usr/local/bin/fastpath-bench", "--help"}, "Usage"},
				}
			case "domain-hook":
				runs = []run{
					{[]string{SidecarShimPath, "--help"}, "--version string"},
					{[]string{"/usr/bin/onDefineDomain", "--help"}, "--domain"},
				}
			case "agent":
				runs = []run{
					{[]string{"/usr/local/bin/fastpath-agent", "--help"}, "Usage"},
					{[]string{"/usr/local/bin/fastpath", "--help"}, "CNI plugin fastpath"},
					{[]string{"/usr/local/bin/fastpath-ovs-plugin", "--help"}, "CNI plugin fastpath"},
					// Dynamically linked: it starts only if the cc base's glibc and
					// libgcc_s are in the image where the loader looks.
					{[]string{"/usr/local/bin/vhost-device-vsock", "--version"}, "vhost-device-vsock " + VhostDeviceVsockVersion},
				}
			case "operator":
				runs = []run{{[]string{"/usr/local/bin/fastpath-operator", "--help"}, "Usage"}}
			case "vsock-backend":
				runs = []run{
					{[]string{"/usr/local/bin/fastpath-vsock-backend", "--help"}, "--sibling-backend-socket"},
					{[]string{"/usr/local/bin/vhost-device-vsock", "--version"}, "vhost-device-vsock " + VhostDeviceVsockVersion},
				}
			default:
				t.Fatalf("no check for image %s", r.Target.Name)
			}
			for _, rn := range runs {
				out, err := inImage(t, rootfs, uid, gid, rn.argv...)
				if rn.argv[0] != SidecarShimPath { // pflag's --help exits 2
					g.Expect(err).NotTo(HaveOccurred(), "%v as %d:%d: %s", rn.argv, uid, gid, out)
				}
				g.Expect(out).To(ContainSubstring(rn.want), "%v as %d:%d", rn.argv, uid, gid)
			}
		})
	}
}

// containerd is a containerd of this test's own: root, state, socket and opt
// directory under a temporary directory, the CRI plugin off (only images).
type containerd struct {
	dir, sock string
	cmd       *exec.Cmd
	log       bytes.Buffer
}

func startContainerd(t *testing.T) *containerd {
	t.Helper()
	for _, tool := range []string{"containerd", "ctr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("this test needs %s (Debian package containerd, installed by hack/setup.sh): %v", tool, err)
		}
	}
	_, runContainerdErr := os.Stat("/run/containerd")
	dir, err := os.MkdirTemp("", "fp-ctd-")
	if err != nil {
		t.Fatal(err)
	}
	c := &containerd{dir: dir, sock: filepath.Join(dir, "containerd.sock")}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.sock, filepath.Join(dir, "opt"))
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"))
	c.cmd.Stdout, c.cmd.Stderr = &c.log, &c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- c.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
		// Unmount anything left under the root (the overlayfs snapshotter mounts
		// nothing for image import, but be sure), then remove the directory.
		_ = exec.Command("umount", "-R", dir).Run()
		os.RemoveAll(dir)
		// containerd 1.6 makes /run/containerd (and /run/containerd/s for shims)
		// whatever its state directory: remove it when it was not there before.
		if os.IsNotExist(runContainerdErr) {
			os.Remove("/run/containerd/s")
			os.Remove("/run/containerd")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := exec.Command("ctr", "--address", c.sock, "version").Run(); err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not answer on %s: %s", c.sock, c.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Import puts every archive into a containerd, which lists each image under
// its ref for linux/amd64 and unpacks it.
func TestImportIntoContainerd(t *testing.T) {
	testutil.RequireRoot(t)
	results := buildAll(t)
	g := NewWithT(t)
	c := startContainerd(t)
	var out bytes.Buffer
	g.Expect(Import(context.Background(), c.sock, builtDir, &out)).To(Succeed(), out.String())
	t.Log(out.String())
	ls, err := exec.Command("ctr", "--address", c.sock, "-n", CRINamespace, "images", "ls").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(ls))
	t.Logf("ctr images ls:\n%s", ls)
	for _, r := range results {
		g.Expect(string(ls)).To(MatchRegexp(`(?m)^%s\s.*\slinux/amd64\s`, strings.ReplaceAll(r.Target.Ref, ".", `\.`)))
		g.Expect(out.String()).To(ContainSubstring("unpacking " + r.Target.Ref))
	}

	// A missing address is refused before ctr runs.
	g.Expect(Import(context.Background(), "", builtDir, io.Discard)).To(MatchError(ContainSubstring("address (containerd's socket) is empty")))
}
