package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// KubernetesVersion is the k8s.io/kubernetes module (pinned in hack/tools)
// whose build/pause/linux/pause.c the pause image is built from.
const KubernetesVersion = "v1.34.1"

// PauseVersion is the pause release that source carries (build/pause/Makefile TAG).
const PauseVersion = "3.10.1"

// Builder builds Targets into OCI archives.
type Builder struct {
	// Root is the repository root (where go.mod and Dockerfile are).
	Root string
	// Out is where archives go (<Out>/<name>.tar).
	Out string
	// Cache holds built binaries (Cache/bin) and Debian packages (Cache/debs);
	// empty means <Out>/cache. The hash of an archive's inputs is <Out>/.<name>.inputs.
	Cache string
	// Log gets progress lines; nil discards.
	Log io.Writer
	// SidecarShim builds KubeVirt's sidecar-shim and returns the path of the
	// binary, or an error saying why it cannot be built here (the domain-hook
	// image is then skipped with that reason). Nil means BuildSidecarShim.
	SidecarShim func(ctx context.Context, b *Builder) (string, error)
}

// Result says what Build did with one target.
type Result struct {
	Target Target
	// Archive is the archive path; empty when Skipped.
	Archive string
	// Size is the archive's size in bytes.
	Size int64
	// Cached is true when the inputs were unchanged and the archive was kept.
	Cached bool
	// Skipped is why the target was not built ("" when it was).
	Skipped string
	// Took is the time spent on this target.
	Took time.Duration
}

func (b *Builder) logf(format string, args ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, "images: "+format+"\n", args...)
	}
}

func (b *Builder) cache(parts ...string) string {
	dir := b.Cache
	if dir == "" {
		dir = filepath.Join(b.Out, "cache")
	}
	return filepath.Join(append([]string{dir}, parts...)...)
}

// Build builds the targets named in only (all of Targets when empty) in
// Targets order. A target whose inputs (binaries, Debian package versions,
// the Target itself) are unchanged since the last build keeps its archive. A
// domain-hook target whose sidecar-shim cannot be built is skipped, with the
// reason in its Result. Unknown names are an error listing the known ones.
func (b *Builder) Build(ctx context.Context, only ...string) ([]Result, error) {
	targets, err := Select(b.Root, only...)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.cache("bin"), 0o755); err != nil {
		return nil, err
	}
	var results []Result
	for _, t := range targets {
		start := time.Now()
		r, err := b.build(ctx, t)
		r.Target, r.Took = t, time.Since(start)
		if err != nil {
			return results, fmt.Errorf("failed to build image %s: %w", t.Name, err)
		}
		results = append(results, r)
	}
	return results, nil
}

// debianRoot is the part of a Debian root file system that base-files and
// the installer make rather than a package's data: /run with /var/run a link
// to it (libvirtd writes its pidfile and sockets there), and the sticky
// temporary directories. A Base with Closure gets it. The link is relative
// ("../run", as CentOS has it, where Debian writes "/run"): virt-handler
// writes into a launcher through /proc/<pid>/root/var/run/kubevirt-private,
// and an absolute link there resolves in virt-handler's own root, so its
// files (the bridge binding's vif-cache) landed on the node instead.
var debianRoot = []File{
	Dir("/run", 0o755),
	{Path: "/var/run", Mode: fs.ModeSymlink | 0o777, Link: "../run"},
	Dir("/tmp", fs.ModeSticky|0o777),
	Dir("/var/tmp", fs.ModeSticky|0o777),
}

// Select returns the Targets of the repository at root named (all when
// none), in Targets order. KubeVirtTargets and GuestKernelBootTarget are
// known too, but built only when
// named.
func Select(root string, names ...string) ([]Target, error) {
	all, err := Targets(root)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return all, nil
	}
	all = append(all, KubeVirtTargets()...)
	all = append(all, GuestKernelBootTarget)
	known := map[string]bool{}
	for _, t := range all {
		known[t.Name] = true
	}
	want := map[string]bool{}
	for _, n := range names {
		if !known[n] {
			var ks []string
			for _, t := range all {
				ks = append(ks, t.Name)
			}
			return nil, fmt.Errorf("unknown image %q: want one of %s", n, strings.Join(ks, ", "))
		}
		want[n] = true
	}
	var out []Target
	for _, t := range all {
		if want[t.Name] {
			out = append(out, t)
		}
	}
	return out, nil
}

func (b *Builder) build(ctx context.Context, t Target) (Result, error) {
	// Binaries: the stage's programs, built (or taken from the build cache) first.
	bins := map[string]string{}
	for _, bin := range t.Binaries {
		var p string
		var err error
		switch {
		case bin.Prebuilt != "":
			p, err = b.takePrebuilt(ctx, bin)
		case bin.File != "":
			p = filepath.Join(b.Root, bin.File)
			if _, err = os.Stat(p); err != nil {
				err = fmt.Errorf("failed to find %s for %s (`make setup-guests` builds the guest image): %w", bin.File, bin.Path, err)
			}
		case bin.KubeVirt != "":
			p, err = b.takeKubeVirt(bin)
		case bin.Package == "":
			p, err = b.BuildPause(ctx)
		default:
			p, err = b.buildGo(ctx, bin)
		}
		if err != nil {
			return Result{}, err
		}
		bins[bin.Path] = p
	}
	shim := ""
	if t.Base.Name == baseSidecarShim.Name {
		build := b.SidecarShim
		if build == nil {
			build = BuildSidecarShim
		}
		var err error
		if shim, err = build(ctx, b); err != nil {
			var skip *SkipError
			if errors.As(err, &skip) {
				b.logf("SKIPPED %s: %s (build it with `docker build --target %s`)", t.Name, skip.Reason, t.Stage)
				return Result{Skipped: skip.Reason}, nil
			}
			return Result{}, err
		}
	}
	var pkgs []Package
	if len(t.Base.Debs) > 0 {
		debs := Debs{Dir: b.cache("debs"), Log: b.Log}
		var err error
		if t.Base.Name == baseBench.Name || t.Base.Closure {
			start := time.Now()
			pkgs, err = debs.Closure(ctx, t.Base.Debs)
			b.logf("%s: %d Debian packages (%s and the libraries they need) in %.1fs", t.Name, len(pkgs), strings.Join(t.Base.Debs, ", "), time.Since(start).Seconds())
		} else {
			pkgs, err = debs.Fetch(ctx, t.Base.Debs...)
		}
		if err != nil {
			return Result{}, err
		}
	}

	archive := filepath.Join(b.Out, t.Name+".tar")
	stamp, err := inputStamp(t, bins, shim, pkgs)
	if err != nil {
		return Result{}, err
	}
	stampFile := filepath.Join(b.Out, "."+t.Name+".inputs") // beside the archive it describes
	if old, err := os.ReadFile(stampFile); err == nil && string(old) == stamp {
		if fi, err := os.Stat(archive); err == nil {
			b.logf("%s unchanged: %s (%s)", t.Ref, archive, human(fi.Size()))
			return Result{Archive: archive, Size: fi.Size(), Cached: true}, nil
		}
	}

	var extra []File
	if len(t.ModuleFiles) > 0 {
		dir, err := b.kubevirtModuleDir(ctx)
		if err != nil {
			return Result{}, err
		}
		for _, m := range t.ModuleFiles {
			extra = append(extra, Copy(filepath.Join(dir, m.Src), m.Path, m.Mode))
		}
	}
	if t.Base.Closure {
		extra = append(extra, debianRoot...)
	}
	extra = append(extra, t.Shims...)
	layers, err := b.layers(t, bins, shim, pkgs, extra)
	if err != nil {
		return Result{}, err
	}
	img, err := Image(layers, Config{
		Entrypoint: t.Entrypoint, User: t.ConfigUser(), Env: t.env(),
		Labels: map[string]string{
			"org.opencontainers.image.title":  t.Ref,
			"org.opencontainers.image.source": "https://github.com/fastpath-io/fastpath",
		},
	})
	if err != nil {
		return Result{}, err
	}
	if err := WriteArchive(archive, t.Ref, img); err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(stampFile, []byte(stamp), 0o644); err != nil {
		return Result{}, err
	}
	fi, err := os.Stat(archive)
	if err != nil {
		return Result{}, err
	}
	b.logf("wrote %s: %s (%s)", t.Ref, archive, human(fi.Size()))
	return Result{Archive: archive, Size: fi.Size()}, nil
}

// env is the image's environment: none for scratch; PATH and, with a CA
// bundle, SSL_CERT_FILE (as distroless sets them).
func (t Target) env() []string {
	if t.Base.Name == baseScratch.Name {
		return nil
	}
	return []string{"PATH=" + Path, "SSL_CERT_FILE=" + CACertFile}
}

// layers returns the image's layers, bottom first: the base (users, /tmp, CA
// bundle), the Debian packages (cc and bench; cc without ca-certificates,
// whose bundle is in the base layer, as distroless has it), the sidecar-shim,
// the binaries.
func (b *Builder) layers(t Target, bins map[string]string, shim string, pkgs []Package, extra []File) ([]LayerSpec, error) {
	var specs []LayerSpec
	add := func(files []File, by string) error {
		l, err := Layer(files)
		if err != nil {
			return fmt.Errorf("failed to make layer %q: %w", by, err)
		}
		specs = append(specs, LayerSpec{Layer: l, CreatedBy: by})
		return nil
	}
	if t.Base.Name != baseScratch.Name {
		var caTree string
		for _, p := range pkgs {
			if p.Name == "ca-certificates" {
				caTree = p.Tree
			}
		}
		if caTree == "" {
			return nil, fmt.Errorf("base %s has no ca-certificates package", t.Base.Name)
		}
		files, err := baseFiles(t.Base, caTree)
		if err != nil {
			return nil, err
		}
		if err := add(files, "base: /etc/passwd, /etc/group, /tmp, homes, "+CACertFile+" (from ca-certificates)"); err != nil {
			return nil, err
		}
	}
	if t.Base.installsPackages() {
		var install []Package
		for _, p := range pkgs {
			if t.Base.Name != baseCC.Name || p.Name != "ca-certificates" {
				install = append(install, p)
			}
		}
		files, err := packageFiles(install)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, p := range install {
			names = append(names, p.Name+"="+p.Version)
		}
		if err := add(files, "debian packages: "+strings.Join(names, " ")); err != nil {
			return nil, err
		}
	}
	if shim != "" {
		if err := add([]File{Copy(shim, SidecarShimPath, 0o755)}, "kubevirt sidecar-shim "+KubeVirtVersion); err != nil {
			return nil, err
		}
	}
	if len(extra) > 0 {
		// Above the packages: KubeVirt's configuration replaces theirs (qemu.conf).
		var paths []string
		for _, f := range extra {
			paths = append(paths, f.Path)
		}
		if err := add(extra, "kubevirt "+KubeVirtVersion+" configuration: "+strings.Join(paths, " ")); err != nil {
			return nil, err
		}
	}
	var files []File
	var paths []string
	for _, bin := range t.Binaries {
		f := Copy(bins[bin.Path], bin.Path, 0o755)
		if len(bin.Caps) > 0 {
			caps, err := FileCaps(bin.Caps...)
			if err != nil {
				return nil, err
			}
			f.Xattrs = map[string]string{CapabilityXattr: caps}
		}
		files = append(files, f)
		paths = append(paths, bin.Path)
	}
	if err := add(files, "binaries: "+strings.Join(paths, " ")); err != nil {
		return nil, err
	}
	return specs, nil
}

// inputStamp hashes everything an archive is made of.
func inputStamp(t Target, bins map[string]string, shim string, pkgs []Package) (string, error) {
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(t); err != nil {
		return "", err
	}
	files := []string{shim}
	for _, bin := range t.Binaries {
		files = append(files, bins[bin.Path])
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	for _, p := range pkgs {
		fmt.Fprintf(h, "%s=%s\n", p.Name, p.Version)
	}
	if t.Base.Closure {
		if err := json.NewEncoder(h).Encode(debianRoot); err != nil {
			return "", err
		}
	}
	fmt.Fprintf(h, "format=1\n")
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildGo builds a static Go binary the way the Dockerfile's build stage does
// (CGO_ENABLED=0 go build -trimpath -ldflags "-s -w") into cache/bin/<name>.
func (b *Builder) buildGo(ctx context.Context, bin Binary) (string, error) {
	out := b.cache("bin", bin.Name)
	b.logf("go build -o %s %s", out, bin.Package)
	cmd := goCommand(ctx, b.Root, "build", "-trimpath", "-ldflags", "-s -w", "-o", out, bin.Package)
	cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build %s: %w: %s", bin.Package, err, strings.TrimSpace(string(o)))
	}
	return out, nil
}

// takePrebuilt copies a program built outside the builder (bin.Prebuilt,
// relative to Root) into cache/bin/<name>, after checking that its --version
// output names bin.Version. A missing file is an error saying `make setup`
// builds it.
func (b *Builder) takePrebuilt(ctx context.Context, bin Binary) (string, error) {
	src := filepath.Join(b.Root, bin.Prebuilt)
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("failed to find %s %s at %s (`make setup` builds it, hack/setup.sh): %w", bin.Crate, bin.Version, src, err)
	}
	v, err := exec.CommandContext(ctx, src, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("failed to run %s --version: %w: %s", src, err, strings.TrimSpace(string(v)))
	}
	if !strings.Contains(string(v), " "+bin.Version) {
		return "", fmt.Errorf("failed to take %s: it is %q, want version %s (rerun `make setup`)", src, strings.TrimSpace(string(v)), bin.Version)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	out := b.cache("bin", bin.Name)
	b.logf("%s: %s from %s", bin.Name, strings.TrimSpace(string(v)), bin.Prebuilt)
	if err := os.WriteFile(out, data, 0o755); err != nil {
		return "", fmt.Errorf("failed to copy %s to %s: %w", src, out, err)
	}
	return out, nil
}

func human(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
