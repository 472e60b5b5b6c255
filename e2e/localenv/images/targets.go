package images

import (
	"fmt"
	"os"
	"path/filepath"
)

// Registry and Tag name the images built here. The chart renders
// `{{image.registry}}/fastpath-{{component}}:{{image.tag}}`, so installing
// with image.registry=localhost and image.tag=local uses them.
const (
	Registry = "localhost"
	Tag      = "local"
)

// PauseRef is the sandbox ("pause") image: give it to containerd's CRI plugin
// as sandbox_image so no pod ever pulls registry.k8s.io/pause.
const PauseRef = Registry + "/pause:" + Tag

// Path is the PATH of every image with a base (distroless's and Debian's).
const Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// CACertFile is where the base puts the CA bundle built from Debian's
// ca-certificates (what update-ca-certificates would write).
const CACertFile = "/etc/ssl/certs/ca-certificates.crt"

// Base is what an image is built on: a stand-in, assembled here, for the
// Dockerfile's base image.
type Base struct {
	// Name says which stand-in: "scratch", "static", "cc", "debian" or "sidecar-shim".
	Name string
	// FromArg is the Dockerfile ARG that names the real base image, e.g.
	// "STATIC_NONROOT_IMAGE"; empty for scratch.
	FromArg string
	// Image is that ARG's default, the real base image (a release may add
	// @sha256:<digest>), e.g. "gcr.io/distroless/static-debian12:nonroot".
	Image string
	// User is the real base image's default user, which a stage without USER
	// runs as: "" (root) for distroless static and Debian, "65532" for
	// distroless :nonroot, "1001" for KubeVirt's sidecar-shim (its passwd-image).
	User string
	// Debs are the Debian packages the base is made from: ca-certificates gives
	// every base its CA bundle; the others are installed whole (see
	// installsPackages), for debian with the shared libraries their programs
	// need (Debs.Closure). For debian they are the stage's `apt-get install`
	// in the Dockerfile (TargetsFromDockerfile).
	Debs []string
	// ExtraUsers are passwd/group entries beyond root, nobody and nonroot (65532).
	ExtraUsers []User
	// Closure installs Debs whole plus the packages of the shared libraries
	// their programs need (Debs.Closure), as the bench base does.
	Closure bool
}

// installsPackages says whether the base has its Debian packages' files (cc,
// debian) rather than only the CA bundle made from ca-certificates.
func (b Base) installsPackages() bool {
	return b.Name == baseCC.Name || b.Name == baseBench.Name || b.Closure
}

// User is an /etc/passwd line with a group of the same name and id.
type User struct {
	Name string
	ID   int
	Home string
}

// Binary is one program an image carries.
type Binary struct {
	// Name is the output name in the Dockerfile stage that builds it (/out/<Name>)
	// and in the builder's cache (<Cache>/bin/<Name>).
	Name string
	// Package is the Go package built with CGO_ENABLED=0 -trimpath -ldflags "-s -w",
	// e.g. "./cmd/fastpath-agent"; empty for Kubernetes' pause (C, built with gcc)
	// and for a Crate.
	Package string
	// Crate and Version name a Rust program from crates.io, its source
	// fetched and patched by hack/<Crate>/source.sh <Version> and built with
	// `cargo install --locked --path` (so with the crate's own Cargo.lock): by
	// the Dockerfile stage From, and here by `make setup` (hack/setup.sh) into
	// Prebuilt. Empty for Go and C programs.
	Crate, Version string
	// From is the Dockerfile stage the image copies it from (COPY --from=<From>);
	// empty means "build", the stage that builds the Go binaries.
	From string
	// Prebuilt is the file, relative to the repository root, that the builder
	// takes instead of building the program, e.g. "bin/vhost-device-vsock"; it
	// checks that `<Prebuilt> --version` names Version. Empty: built here.
	Prebuilt string
	// KubeVirt names a KubeVirt program that hack/setup.sh kubevirt built into
	// KubeVirtDir(), taken from there; empty for everything else.
	KubeVirt string
	// File is a file of the repository, relative to the root, taken as it is
	// (e.g. "bin/guest/vmlinuz", which hack/setup.sh guests builds); empty for
	// programs.
	File string
	// Caps are file capabilities (setcap names, e.g. "cap_net_bind_service")
	// the image gives the file, permitted and effective (FileCaps).
	Caps []string
	// Path is where the image has it.
	Path string
}

// SourceStage is the Dockerfile stage the binary is copied from.
func (b Binary) SourceStage() string {
	if b.From == "" {
		return "build"
	}
	return b.From
}

// Target is one image: a Dockerfile stage (Stage) or the pause image.
type Target struct {
	// Name is the archive's base name: _out/images/<Name>.tar.
	Name string
	// Ref is the image name containerd gets on import.
	Ref string
	// Stage is the Dockerfile target ("" for pause, which is not in the Dockerfile).
	Stage string
	Base  Base
	// Binaries are the stage's COPY --from=<stage> lines, in order.
	Binaries []Binary
	// User is the stage's USER ("" when it has none: the base's user applies).
	User string
	// Entrypoint is the stage's ENTRYPOINT.
	Entrypoint []string
	// ModuleFiles are taken from KubeVirt's module source (KubeVirt's images only).
	ModuleFiles []ModuleFile
	// Shims are further files of our own, in the layer of ModuleFiles.
	Shims []File
}

// ConfigUser is the user the image runs as: the stage's USER, else its base's.
func (t Target) ConfigUser() string {
	if t.User != "" {
		return t.User
	}
	return t.Base.User
}

// The stand-in bases. static-nonroot is what distroless static-debian12 is
// (CA bundle, passwd with root/nobody/nonroot, /tmp, /home/nonroot) without
// its tzdata, netbase and base-files. cc is that plus the Debian packages with
// glibc (libc6: libc.so.6, the dynamic loader) and libgcc_s (libgcc-s1), the
// libraries a Rust program links against; distroless cc-debian12 also has
// libstdc++6, libgomp1 and libssl3, which nothing here needs. debian is
// Debian's root with the packages the Dockerfile stage installs.
var (
	baseScratch       = Base{Name: "scratch"}
	baseCC            = Base{Name: "cc", FromArg: "CC_IMAGE", Image: "gcr.io/distroless/cc-debian12", Debs: []string{"libc6", "libgcc-s1", "ca-certificates"}}
	baseStaticNonroot = Base{Name: "static", FromArg: "STATIC_NONROOT_IMAGE", Image: "gcr.io/distroless/static-debian12:nonroot", User: "65532", Debs: []string{"ca-certificates"}}
	baseBench         = Base{Name: "debian", FromArg: "BENCH_BASE_IMAGE", Image: "debian:bookworm-slim"}
	baseSidecarShim   = Base{Name: "sidecar-shim", FromArg: "SIDECAR_SHIM_IMAGE", Image: "quay.io/kubevirt/sidecar-shim:" + KubeVirtVersion, User: "1001", Debs: []string{"ca-certificates"},
		ExtraUsers: []User{{Name: "nonroot-user", ID: 1001, Home: "/home/nonroot-user"}}}
)

// VhostDeviceVsockVersion is the vhost-device-vsock release the agent image
// carries: the Dockerfile's VHOST_DEVICE_VSOCK_VERSION and hack/setup.sh's
// VHOST_VSOCK_VERSION.
const VhostDeviceVsockVersion = "0.3.0"

// SidecarShimPath is where KubeVirt's sidecar-shim image has its program.
const SidecarShimPath = "/sidecar-shim"

func componentRef(c string) string { return Registry + "/fastpath-" + c + ":" + Tag }

// pauseTarget is the sandbox image, built from Kubernetes' build/pause
// recipe (build/pause/Dockerfile: ADD pause /pause, USER 65535:65535), which
// is not in our Dockerfile.
var pauseTarget = Target{
	Name: "pause", Ref: PauseRef, Base: baseScratch,
	Binaries:   []Binary{{Name: "pause", Path: "/pause"}},
	User:       "65535:65535",
	Entrypoint: []string{"/pause"},
}

// Targets returns every image `make images` builds: pause first, then the
// images of the Dockerfile at <root>/Dockerfile in its order (its stages with
// an ENTRYPOINT; TargetsFromDockerfile). Errors: the Dockerfile cannot be
// read, or describes something the builder cannot follow.
func Targets(root string) ([]Target, error) {
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		return nil, fmt.Errorf("failed to read the images' recipe: %w", err)
	}
	ts, err := TargetsFromDockerfile(string(b))
	if err != nil {
		return nil, err
	}
	return append([]Target{pauseTarget}, ts...), nil
}
