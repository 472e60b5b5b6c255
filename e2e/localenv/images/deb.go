package images

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Debs fetches Debian packages with apt (`apt-get download`, from this
// machine's configured sources; netperf needs the non-free component that
// hack/setup.sh enables) and unpacks them with `dpkg -x`, caching both under
// Dir: Dir/<file>.deb and Dir/trees/<file>/. Maintainer scripts never run.
type Debs struct {
	// Dir is the cache directory, e.g. _out/images/cache/debs.
	Dir string
	// Log gets one line per download; nil discards.
	Log io.Writer
}

// Package is one fetched and unpacked Debian package.
type Package struct {
	Name, Version string
	// Deb is the .deb file; Tree is its `dpkg -x` tree.
	Deb, Tree string
	// Control is the package's control paragraph (`dpkg-deb -f`).
	Control []byte
}

// Fetch downloads (unless cached) and unpacks the named packages at the
// candidate versions apt would install, with one `apt-cache show` and at most
// one `apt-get download` (apt loads its cache for about a second per call).
// The result is in the order of names. Errors name the package and the
// failing command.
func (d Debs) Fetch(ctx context.Context, names ...string) ([]Package, error) {
	if len(names) == 0 {
		return nil, nil
	}
	show, err := run(ctx, "", "apt-cache", append([]string{"show", "--no-all-versions"}, names...)...)
	if err != nil {
		return nil, err
	}
	fields := map[string]map[string]string{}
	for _, para := range strings.Split(string(show), "\n\n") {
		f := controlFields([]byte(para))
		if f["Package"] != "" {
			fields[f["Package"]] = f
		}
	}
	if err := os.MkdirAll(filepath.Join(d.Dir, "trees"), 0o755); err != nil {
		return nil, err
	}
	pkgs := make([]Package, len(names))
	var download []string
	for i, name := range names {
		f := fields[name]
		if f["Version"] == "" || f["Architecture"] == "" {
			return nil, fmt.Errorf("failed to resolve Debian package %s: apt-cache show gave no Version/Architecture", name)
		}
		// apt-get download's file name: the epoch's colon is escaped as %3a.
		file := fmt.Sprintf("%s_%s_%s.deb", name, strings.ReplaceAll(f["Version"], ":", "%3a"), f["Architecture"])
		pkgs[i] = Package{Name: name, Version: f["Version"], Deb: filepath.Join(d.Dir, file),
			Tree: filepath.Join(d.Dir, "trees", strings.TrimSuffix(file, ".deb"))}
		if _, err := os.Stat(pkgs[i].Deb); err != nil {
			download = append(download, name+"="+f["Version"])
		}
	}
	if len(download) > 0 {
		if d.Log != nil {
			fmt.Fprintf(d.Log, "images: apt-get download %s\n", strings.Join(download, " "))
		}
		if _, err := run(ctx, d.Dir, "apt-get", append([]string{"download", "-q"}, download...)...); err != nil {
			return nil, err
		}
	}
	for i, p := range pkgs {
		if _, err := os.Stat(p.Deb); err != nil {
			return nil, fmt.Errorf("failed to download Debian package %s: apt-get download left no %s", p.Name, p.Deb)
		}
		if _, err := os.Stat(p.Tree); err != nil {
			tmp := p.Tree + ".tmp"
			os.RemoveAll(tmp)
			if _, err := run(ctx, "", "dpkg-deb", "-x", p.Deb, tmp); err != nil {
				return nil, err
			}
			if err := os.Rename(tmp, p.Tree); err != nil {
				return nil, err
			}
		}
		if pkgs[i].Control, err = run(ctx, "", "dpkg-deb", "-f", p.Deb); err != nil {
			return nil, err
		}
	}
	return pkgs, nil
}

// Closure fetches names and then, from the direct Depends and Pre-Depends of
// the packages taken so far, only those that ship a shared library (or the
// dynamic loader) that an ELF program or library already taken needs
// (DT_NEEDED, PT_INTERP), until nothing is missing. Packages a Depends names
// for maintainer scripts only (adduser, passwd, debconf, ...) are not taken:
// nothing here runs those scripts. It fails, naming the libraries, when a
// needed library is in none of the candidates. The result is sorted by name.
func (d Debs) Closure(ctx context.Context, names []string) ([]Package, error) {
	taken := map[string]Package{}
	tried := map[string]bool{}
	first, err := d.Fetch(ctx, names...)
	if err != nil {
		return nil, err
	}
	for _, p := range first {
		taken[p.Name], tried[p.Name] = p, true
	}
	fresh := names // taken packages whose Depends are not yet candidates
	var candidates []string
	for {
		missing, err := missingLibraries(taken)
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			break
		}
		deps, err := directDepends(ctx, fresh...)
		if err != nil {
			return nil, err
		}
		fresh = nil
		for _, dep := range deps {
			if !tried[dep] {
				tried[dep] = true
				candidates = append(candidates, dep)
			}
		}
		fetched, err := d.Fetch(ctx, candidates...)
		if err != nil {
			return nil, err
		}
		candidates = nil
		for _, p := range fetched {
			if provides(p.Tree, missing) {
				taken[p.Name] = p
				fresh = append(fresh, p.Name)
			} else {
				candidates = append(candidates, p.Name) // may provide a library found missing later
			}
		}
		if len(fresh) == 0 {
			return nil, fmt.Errorf("failed to find the Debian packages of shared libraries %s needed by %s", strings.Join(sortedKeys(missing), ", "), strings.Join(names, ", "))
		}
	}
	out := make([]Package, 0, len(taken))
	for _, n := range sortedKeys(taken) {
		out = append(out, taken[n])
	}
	return out, nil
}

// libDirs are the directories the dynamic loader searches without an
// ld.so.cache (glibc's built-in system directories on Debian amd64).
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib", "/lib64", "/usr/lib64"}

// missingLibraries returns the sonames (and loader paths) the ELF files of
// pkgs need that no tree in pkgs provides, looking in libDirs and in the
// file's DT_RUNPATH/DT_RPATH directories ($ORIGIN expanded).
func missingLibraries(pkgs map[string]Package) (map[string]bool, error) {
	type need struct {
		lib  string
		dirs []string
	}
	var needs []need
	have := map[string]bool{}
	for _, p := range pkgs {
		err := filepath.WalkDir(p.Tree, func(fp string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel := "/" + filepath.ToSlash(strings.TrimPrefix(fp, p.Tree+string(filepath.Separator)))
			if de.IsDir() {
				return nil
			}
			have[rel] = true
			if !de.Type().IsRegular() {
				return nil
			}
			e, err := readELF(fp)
			if err != nil {
				return err
			}
			for _, l := range e.needed {
				dirs := append([]string{}, libDirs...)
				for _, rp := range e.runpath {
					dirs = append(dirs, path.Clean(strings.ReplaceAll(rp, "$ORIGIN", path.Dir(rel))))
				}
				needs = append(needs, need{lib: l, dirs: dirs})
			}
			if e.interp != "" {
				needs = append(needs, need{lib: e.interp})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("failed to scan package %s: %w", p.Name, err)
		}
	}
	missing := map[string]bool{}
	for _, n := range needs {
		found := strings.HasPrefix(n.lib, "/") && have[n.lib]
		for _, d := range n.dirs {
			found = found || have[path.Join(d, n.lib)]
		}
		if !found {
			missing[n.lib] = true
		}
	}
	return missing, nil
}

func inLibDir(p string) bool {
	for _, d := range libDirs {
		if path.Dir(p) == d {
			return true
		}
	}
	return false
}

type elfInfo struct {
	needed, runpath []string
	interp          string
}

// readELF returns an ELF file's DT_NEEDED entries, DT_RUNPATH and DT_RPATH
// directories and PT_INTERP; a file that is not ELF needs nothing.
func readELF(file string) (elfInfo, error) {
	f, err := os.Open(file)
	if err != nil {
		return elfInfo{}, err
	}
	defer f.Close()
	return readELFFrom(f)
}

// readELFFrom is readELF of content r.
func readELFFrom(r io.ReaderAt) (elfInfo, error) {
	var e elfInfo
	f, err := elf.NewFile(r)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return e, nil
		}
		return e, err
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		// Firmware for other machines (QEMU's s390-ccw.img, qemu-system-data's
		// PowerPC and RISC-V blobs) runs in guests, never here.
		return e, nil
	}
	if e.needed, err = f.ImportedLibraries(); err != nil {
		return elfInfo{}, nil // no dynamic section: static or not an object
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			e.runpath = append(e.runpath, strings.Split(v, ":")...)
		}
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(prog.Open())
			if err != nil {
				return elfInfo{}, err
			}
			e.interp = strings.TrimRight(string(b), "\x00")
		}
	}
	return e, nil
}

func provides(tree string, missing map[string]bool) bool {
	found := false
	_ = filepath.WalkDir(tree, func(fp string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(fp, tree+string(filepath.Separator)))
		if missing[rel] || (inLibDir(rel) && missing[path.Base(rel)]) {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// directDepends returns the real packages that names Depend or Pre-Depend on
// (every alternative; virtual packages left out), in one `apt-cache depends`.
func directDepends(ctx context.Context, names ...string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	out, err := run(ctx, "", "apt-cache", append([]string{"depends", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances"}, names...)...)
	if err != nil {
		return nil, err
	}
	var deps []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimLeft(strings.TrimSpace(sc.Text()), "|")
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "Depends" && k != "PreDepends") {
			continue
		}
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, "<") {
			continue
		}
		deps = append(deps, v)
	}
	return deps, nil
}

// controlFields parses the first paragraph of Debian control data (single-line fields).
func controlFields(b []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// run runs a command in dir and returns its stdout; the error carries the
// command line and its stderr.
func run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("failed to run %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
