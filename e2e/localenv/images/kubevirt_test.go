package images

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func TestFileCapsIsWhatSetcapWrites(t *testing.T) {
	g := NewWithT(t)
	v, err := FileCaps("cap_net_bind_service")
	g.Expect(err).NotTo(HaveOccurred())
	// getfattr -n security.capability -e hex after `setcap cap_net_bind_service+ep`.
	g.Expect([]byte(v)).To(Equal([]byte{1, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}))
	caps, eff, err := ParseFileCaps(v)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(caps).To(ConsistOf("cap_net_bind_service"))
	g.Expect(eff).To(BeTrue())
	_, err = FileCaps("cap_bogus")
	g.Expect(err).To(MatchError(ContainSubstring(`"cap_bogus"`)))
}

func TestKubeVirtImagesAreNotBuiltByDefault(t *testing.T) {
	g := NewWithT(t)
	all, err := Select(repoRoot(t))
	g.Expect(err).NotTo(HaveOccurred())
	for _, kt := range KubeVirtTargets() {
		g.Expect(all).NotTo(ContainElement(HaveField("Name", kt.Name)))
		one, err := Select(repoRoot(t), kt.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(one).To(HaveLen(1))
		g.Expect(one[0].Ref).To(Equal("localhost/kubevirt/" + kt.Name + ":" + KubeVirtVersion))
	}
}

// kubevirtImage is what one KubeVirt image must hold, from its
// cmd/<name>/BUILD.bazel at KubeVirtVersion.
type kubevirtImage struct {
	user string
	// files must be in the image (regular files or links), with these modes
	// when non-zero.
	files map[string]os.FileMode
	// passwd lines the image's /etc/passwd has.
	passwd []string
	// caps: file -> capabilities.
	caps map[string][]string
}

// The five KubeVirt images hold KubeVirt's programs, users and configuration
// where KubeVirt's Bazel images have them, plus Debian's libvirt and QEMU and
// the virtqemud shim in the launcher. Needs hack/setup.sh kubevirt's build
// (skipped without it: tens of minutes cold).
func TestKubeVirtImagesHoldWhatKubeVirtsImageDefinitionsSay(t *testing.T) {
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, KubeVirtDir(), ".stamp")); err != nil {
		t.Skipf("KubeVirt %s is not built here (make setup-kubevirt): %v", KubeVirtVersion, err)
	}
	passwdImage := kubevirtImage{user: "1001", passwd: []string{"nonroot-user:x:1001:1001:"}}
	want := map[string]kubevirtImage{
		"virt-operator":   passwdImage,
		"virt-api":        passwdImage,
		"virt-controller": passwdImage,
		"virt-handler": {
			files:  map[string]os.FileMode{"/usr/bin/virt-chroot": 0o755, "/etc/nsswitch.conf": 0o644, "/bin/bash": 0, "/usr/bin/nsenter": 0, "/usr/bin/findmnt": 0, "/usr/bin/cp": 0},
			passwd: []string{"qemu:x:107:107:"},
		},
		"virt-launcher": {
			files: map[string]os.FileMode{
				"/usr/bin/container-disk": 0o755, "/usr/bin/virt-freezer": 0o755, "/usr/bin/virt-probe": 0o755,
				"/usr/bin/cp": 0, "/usr/bin/sync": 0, // container-disk-binary runs /usr/bin/cp
				"/usr/bin/virt-tail": 0o755, "/usr/bin/node-labeller.sh": 0o755,
				"/etc/libvirt/qemu.conf": 0o644, "/etc/libvirt/virtqemud.conf": 0o644, "/etc/libvirt/hooks/qemu": 0o755,
				VirtqemudShimPath: 0o755, "/usr/sbin/libvirtd": 0, "/usr/sbin/virtlogd": 0, "/usr/bin/virsh": 0,
				"/usr/bin/qemu-system-x86_64": 0, "/usr/bin/qemu-img": 0, "/usr/share/seabios/bios-256k.bin": 0,
				"/bin/bash": 0,
			},
			passwd: []string{"qemu:x:107:107:"},
			caps:   map[string][]string{"/usr/bin/virt-launcher-monitor": {"cap_net_bind_service"}},
		},
	}
	var names []string
	for _, kt := range KubeVirtTargets() {
		names = append(names, kt.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b := &Builder{Root: root, Out: t.TempDir(), Cache: filepath.Join(root, "_out", "images", "cache"), Log: testWriter{t}}
	results, err := b.Build(ctx, names...)
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(results).To(HaveLen(len(want)))
	for _, r := range results {
		t.Run(r.Target.Name, func(t *testing.T) {
			g := NewWithT(t)
			w, tg := want[r.Target.Name], r.Target
			imgs, err := ReadArchive(r.Archive, t.TempDir())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(imgs).To(HaveLen(1))
			g.Expect(imgs[0].Ref).To(Equal(tg.Ref))
			cf, err := imgs[0].Image.ConfigFile()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cf.Config.Entrypoint).To(Equal([]string{"/usr/bin/" + tg.Name}))
			g.Expect(cf.Config.User).To(Equal(w.user))
			fs := flatten(t, mutate.Extract(imgs[0].Image))
			t.Logf("%s: %s", tg.Ref, human(r.Size))
			e, ok := fs["/usr/bin/"+tg.Name]
			g.Expect(ok).To(BeTrue(), "the program in the image")
			g.Expect(e.hdr.Mode).To(Equal(int64(0o755)))
			if tg.Base.Closure {
				// Relative, so that /proc/<pid>/root/var/run stays in the image's root.
				g.Expect(fs["/var/run"].hdr.Linkname).To(Equal("../run"))
			}
			for p, mode := range w.files {
				e, ok := fs[p]
				g.Expect(ok).To(BeTrue(), "%s in the image", p)
				if l := e.hdr.Linkname; e.hdr.Typeflag == tar.TypeSymlink && strings.HasPrefix(l, "/") {
					_, ok := fs[l]
					g.Expect(ok).To(BeTrue(), "%s links to %s, which the image has", p, l)
				}
				if mode != 0 {
					g.Expect(e.hdr.Mode).To(Equal(int64(mode)), p)
				}
			}
			for _, l := range w.passwd {
				g.Expect(string(fs["/etc/passwd"].data)).To(ContainSubstring("\n" + l))
			}
			for p, caps := range w.caps {
				v, ok := fs[p].hdr.PAXRecords["SCHILY.xattr."+CapabilityXattr]
				g.Expect(ok).To(BeTrue(), "%s has file capabilities", p)
				got, eff, err := ParseFileCaps(v)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(ConsistOf(caps))
				g.Expect(eff).To(BeTrue())
			}
			if tg.Name == "virt-launcher" {
				g.Expect(string(fs[VirtqemudShimPath].data)).To(Equal(VirtqemudShim))
				g.Expect(fs["/etc/libvirt/virtqemud.conf"].hdr.Typeflag).To(Equal(byte(tar.TypeReg)))
				g.Expect(string(fs["/etc/libvirt/qemu.conf"].data)).NotTo(ContainSubstring("# Master configuration file for the QEMU driver"),
					"KubeVirt's qemu.conf, not Debian's")
			}
			g.Expect(strings.Join(cf.Config.Env, " ")).To(ContainSubstring("PATH=" + Path))
		})
	}
}
