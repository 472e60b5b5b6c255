package images

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KubeVirtRegistry is where the KubeVirt images built here are named:
// <KubeVirtRegistry>/<component>:<KubeVirtVersion>, what hack/setup.sh
// kubevirt renders into kubevirt-operator.yaml (--container-prefix).
const KubeVirtRegistry = Registry + "/kubevirt"

// QemuUID is KubeVirt's qemu user and group, which a non-root virt-launcher runs as.
const QemuUID = 107

// VirtqemudShimPath is where virt-launcher execs virtqemud
// (pkg/virt-launcher/virtwrap/util/libvirt_helper.go, StartVirtqemud).
const VirtqemudShimPath = "/usr/sbin/virtqemud"

// VirtqemudShim stands in for virtqemud, which Debian does not package
// (bookworm and trixie ship the monolithic libvirtd). virt-launcher runs
// `virtqemud -f /var/run/libvirt/virtqemud.conf` (KubeVirt's virtqemud.conf,
// valid for libvirtd too) and, as non-root, dials
// qemu+unix:///session?socket=/var/run/libvirt/virtqemud-sock; libvirtd in
// session mode listens on $XDG_RUNTIME_DIR/libvirt/libvirt-sock (the launcher
// pod sets XDG_RUNTIME_DIR=/var/run), so the shim links virtqemud-sock to it.
// As root, libvirtd is in system mode at /var/run/libvirt/libvirt-sock, which
// qemu:///system dials. exec keeps the PID, the stderr pipe and the ambient
// CAP_NET_BIND_SERVICE virt-launcher gives it.
const VirtqemudShim = `#!/bin/bash
# virtqemud stand-in (Fastpath e2e/localenv/images): Debian ships libvirtd only.
set -eu
if [ "$(id -u)" != 0 ]; then
	run="${XDG_RUNTIME_DIR:-/var/run}/libvirt"
	mkdir -p "$run"
	ln -sfn libvirt-sock "$run/virtqemud-sock"
fi
exec /usr/sbin/libvirtd "$@"
`

// ModuleFile is a file an image takes from KubeVirt's module source (its
// configuration files next to cmd/<component>/BUILD.bazel).
type ModuleFile struct {
	// Src is the path in kubevirt.io/kubevirt@KubeVirtVersion, e.g. "cmd/virt-launcher/qemu.conf".
	Src string
	// Path is where the image has it; Mode its permission bits.
	Path string
	Mode os.FileMode
}

// The bases of KubeVirt's images, from cmd/*/BUILD.bazel at KubeVirtVersion:
// virt-operator, -api and -controller are on //:passwd-image (distroless-like,
// user nonroot-user 1001); virt-handler and virt-launcher on a CentOS Stream 9
// root file system (//rpm:handlerbase, //rpm:launcherbase) with passwd root and
// qemu (107). Here those file systems are Debian bookworm's packages of the
// same programs (Closure), with libvirt 9.0 and QEMU 7.2.
var (
	baseKubeVirt = Base{Name: "kubevirt-passwd", FromArg: "", Image: "kubevirt //:passwd-image", User: "1001", Debs: []string{"ca-certificates"},
		ExtraUsers: []User{{Name: "nonroot-user", ID: 1001, Home: "/home/nonroot-user"}}}
	baseHandler = Base{Name: "kubevirt-handler", Image: "kubevirt //rpm:handlerbase", Closure: true,
		Debs: []string{"ca-certificates", "bash", "dash", "coreutils", "procps", "psmisc", "iproute2", "libatm1", "nftables", "acl", "gawk", "grep", "sed",
			"diffutils", "gzip", "util-linux", "xorriso", "passt"},
		ExtraUsers: []User{{Name: "qemu", ID: QemuUID, Home: "/home/qemu"}}}
	baseLauncher = Base{Name: "kubevirt-launcher", Image: "kubevirt //rpm:launcherbase", Closure: true,
		Debs: []string{"ca-certificates", "bash", "dash", "coreutils", "findutils", "procps", "psmisc", "iproute2", "libatm1", "nftables", "ethtool",
			"gawk", "grep", "sed", "gzip", "tar", "xorriso", "passt", "dmidecode",
			"libvirt-daemon", "libvirt-daemon-driver-qemu", "libvirt-clients",
			"qemu-system-x86", "qemu-system-common", "qemu-system-data", "qemu-utils", "seabios", "ipxe-qemu"},
		// libvirt-qemu: Debian's libvirt is built with qemu_user and qemu_group
		// libvirt-qemu and looks both up when its QEMU driver starts as root
		// (node-labeller.sh), before it reads qemu.conf's user = "qemu".
		ExtraUsers: []User{{Name: "qemu", ID: QemuUID, Home: "/home/qemu"}, {Name: "libvirt-qemu", ID: 64055, Home: "/var/lib/libvirt"}}}
)

func kubevirtRef(c string) string { return KubeVirtRegistry + "/" + c + ":" + KubeVirtVersion }

// usrBinLinks are the programs KubeVirt runs by a /usr/bin path (cp: the
// container-disk-binary init container, pkg/virt-controller/services;
// findmnt and sync: virt-handler and virt-launcher) that Debian bookworm's
// packages put in /bin. CentOS Stream 9 has a merged /usr; a root made of
// .debs does not, so each gets a link where KubeVirt looks.
var usrBinLinks = []File{
	{Path: "/usr/bin/cp", Mode: fs.ModeSymlink | 0o777, Link: "/bin/cp"},
	{Path: "/usr/bin/findmnt", Mode: fs.ModeSymlink | 0o777, Link: "/bin/findmnt"},
	{Path: "/usr/bin/sync", Mode: fs.ModeSymlink | 0o777, Link: "/bin/sync"},
}

// kv is a KubeVirt program at /usr/bin, as KubeVirt's pkg_tar puts them.
func kv(name string, caps ...string) Binary {
	return Binary{Name: name, KubeVirt: name, Path: "/usr/bin/" + name, Caps: caps}
}

// KubeVirtTargets returns KubeVirt's images at KubeVirtVersion, built from
// hack/setup.sh kubevirt's bin/kubevirt/<version>/ (make kubevirt-images).
// Not among Targets: `make images` does not build them.
func KubeVirtTargets() []Target {
	ts := kubevirtTargets()
	for i := range ts {
		if ts[i].Base.Closure {
			ts[i].Shims = append(append([]File(nil), usrBinLinks...), ts[i].Shims...)
		}
	}
	return ts
}

func kubevirtTargets() []Target {
	return []Target{
		{
			Name: "virt-operator", Ref: kubevirtRef("virt-operator"), Base: baseKubeVirt,
			Binaries:   []Binary{kv("virt-operator")},
			User:       "1001",
			Entrypoint: []string{"/usr/bin/virt-operator"},
		},
		{
			Name: "virt-api", Ref: kubevirtRef("virt-api"), Base: baseKubeVirt,
			Binaries:   []Binary{kv("virt-api")},
			User:       "1001",
			Entrypoint: []string{"/usr/bin/virt-api"},
		},
		{
			Name: "virt-controller", Ref: kubevirtRef("virt-controller"), Base: baseKubeVirt,
			Binaries:   []Binary{kv("virt-controller")},
			User:       "1001",
			Entrypoint: []string{"/usr/bin/virt-controller"},
		},
		{
			Name: "virt-handler", Ref: kubevirtRef("virt-handler"), Base: baseHandler,
			Binaries: []Binary{kv("virt-handler"), kv("virt-chroot")},
			ModuleFiles: []ModuleFile{
				{Src: "cmd/virt-handler/nsswitch.conf", Path: "/etc/nsswitch.conf", Mode: 0o644},
			},
			Entrypoint: []string{"/usr/bin/virt-handler"},
		},
		{
			Name: "virt-launcher", Ref: kubevirtRef("virt-launcher"), Base: baseLauncher,
			Binaries: []Binary{
				kv("virt-launcher"), kv("container-disk"), kv("virt-freezer"),
				kv("virt-launcher-monitor", "cap_net_bind_service"), kv("virt-probe"), kv("virt-tail"),
			},
			ModuleFiles: []ModuleFile{
				{Src: "cmd/virt-launcher/node-labeller/node-labeller.sh", Path: "/usr/bin/node-labeller.sh", Mode: 0o755},
				{Src: "cmd/virt-launcher/qemu.conf", Path: "/etc/libvirt/qemu.conf", Mode: 0o644},
				{Src: "cmd/virt-launcher/virtqemud.conf", Path: "/etc/libvirt/virtqemud.conf", Mode: 0o644},
				{Src: "cmd/virt-launcher/nsswitch.conf", Path: "/etc/nsswitch.conf", Mode: 0o644},
				{Src: "cmd/virt-launcher/qemu", Path: "/etc/libvirt/hooks/qemu", Mode: 0o755},
			},
			// /var/log/libvirt: libvirtd -d (node-labeller.sh, as root) logs to a file there.
			// virtlogd.conf: virt-launcher runs virtlogd -f /etc/libvirt/virtlogd.conf, a file
			// CentOS's libvirt-daemon has and Debian's libvirt-daemon-system (not taken:
			// systemd units, polkit) has; empty, virtlogd keeps its defaults.
			Shims: []File{Content(VirtqemudShimPath, 0o755, []byte(VirtqemudShim)), Dir("/usr/lib64/qemu-kvm", 0o755), Dir("/var/log/libvirt", 0o755),
				Content("/etc/libvirt/virtlogd.conf", 0o644, []byte("# virtlogd's defaults (Fastpath e2e/localenv/images: Debian ships this file in libvirt-daemon-system)\n"))},

			Entrypoint: []string{"/usr/bin/virt-launcher"},
		},
	}
}

// KubeVirtDir is where hack/setup.sh kubevirt puts KubeVirt's programs, relative to Root.
func KubeVirtDir() string { return filepath.Join("bin", "kubevirt", KubeVirtVersion) }

// takeKubeVirt returns the path of the KubeVirt program bin.KubeVirt that
// hack/setup.sh kubevirt built, or an error saying to build it.
func (b *Builder) takeKubeVirt(bin Binary) (string, error) {
	dir := filepath.Join(b.Root, KubeVirtDir())
	if _, err := os.Stat(filepath.Join(dir, ".stamp")); err != nil {
		return "", fmt.Errorf("failed to find KubeVirt %s's programs in %s (`make setup-kubevirt` builds them): %w", KubeVirtVersion, dir, err)
	}
	p := filepath.Join(dir, bin.KubeVirt)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("failed to find KubeVirt's %s: %w", bin.KubeVirt, err)
	}
	return p, nil
}

// kubevirtModuleDir returns the directory of kubevirt.io/kubevirt at the
// version hack/tools/kubevirt pins, downloading it through the module proxy
// if it is not in the module cache.
func (b *Builder) kubevirtModuleDir(ctx context.Context) (string, error) {
	cmd := goCommand(ctx, filepath.Join(b.Root, "hack", "tools", "kubevirt"), "mod", "download", "-json", "kubevirt.io/kubevirt")
	o, err := cmd.Output()
	var m struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(o, &m)
	}
	if err != nil || m.Dir == "" {
		return "", fmt.Errorf("failed to find kubevirt.io/kubevirt's source (hack/tools/kubevirt): %v %s", err, m.Error)
	}
	return m.Dir, nil
}
