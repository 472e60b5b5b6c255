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

// Fetch downloads (unless cached) and unpacks package name at the candidate
// version apt would install. Errors name the package and the failing command.
func (d Debs) Fetch(ctx context.Context, name string) (Package, error) {
	show, err := run(ctx, "", "apt-cache", "show", "--no-all-versions", name)
	if err != nil {
		return Package{}, err
	}
	fields := controlFields(show)
	p := Package{Name: name, Version: fields["Version"]}
	file := path.Base(fields["Filename"])
	if p.Version == "" || file == "." || !strings.HasSuffix(file, ".deb") {
		return Package{}, fmt.Errorf("failed to resolve Debian package %s: apt-cache show gave no Version/Filename", name)
	}
	if err := os.MkdirAll(filepath.Join(d.Dir, "trees"), 0o755); err != nil {
		return Package{}, err
	}
	p.Deb = filepath.Join(d.Dir, file)
	if _, err := os.Stat(p.Deb); err != nil {
		if d.Log != nil {
			fmt.Fprintf(d.Log, "images: apt-get download %s=%s\n", name, p.Version)
		}
		if _, err := run(ctx, d.Dir, "apt-get", "download", "-q", name+"="+p.Version); err != nil {
			return Package{}, err
		}
		if _, err := os.Stat(p.Deb); err != nil {
			return Package{}, fmt.Errorf("failed to download Debian package %s: apt-get download left no %s", name, file)
		}
	}
	p.Tree = filepath.Join(d.Dir, "trees", strings.TrimSuffix(file, ".deb"))
	if _, err := os.Stat(p.Tree); err != nil {
		tmp := p.Tree + ".tmp"
		os.RemoveAll(tmp)
		if _, err := run(ctx, "", "dpkg-deb", "-x", p.Deb, tmp); err != nil {
			return Package{}, err
		}
		if err := os.Rename(tmp, p.Tree); err != nil {
			return Package{}, err
		}
	}
	if p.Control, err = run(ctx, "", "dpkg-deb", "-f", p.Deb); err != nil {
		return Package{}, err
	}
	return p, nil
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
	for _, n := range names {
		p, err := d.Fetch(ctx, n)
		if err != nil {
			return nil, err
		}
		taken[n], tried[n] = p, true
	}
	for {
		missing, err := missingLibraries(taken)
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			break
		}
		added := false
		for _, n := range sortedKeys(taken) {
			deps, err := directDepends(ctx, n)
			if err != nil {
				return nil, err
			}
			for _, dep := range deps {
				if tried[dep] {
					continue
				}
				tried[dep] = true
				p, err := d.Fetch(ctx, dep)
				if err != nil {
					return nil, err
				}
				if provides(p.Tree, missing) {
					taken[dep], added = p, true
				}
			}
		}
		if !added {
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
// pkgs need that no tree in pkgs provides.
func missingLibraries(pkgs map[string]Package) (map[string]bool, error) {
	need := map[string]bool{}
	have := map[string]bool{}
	for _, p := range pkgs {
		err := filepath.WalkDir(p.Tree, func(fp string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel := "/" + filepath.ToSlash(strings.TrimPrefix(fp, p.Tree+string(filepath.Separator)))
			if !de.IsDir() {
				have[rel] = true
				if inLibDir(rel) {
					have[path.Base(rel)] = true
				}
			}
			if !de.Type().IsRegular() {
				return nil
			}
			libs, interp, err := elfNeeds(fp)
			if err != nil {
				return err
			}
			for _, l := range libs {
				need[l] = true
			}
			if interp != "" {
				need[interp] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("failed to scan package %s: %w", p.Name, err)
		}
	}
	missing := map[string]bool{}
	for n := range need {
		if !have[n] {
			missing[n] = true
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

// elfNeeds returns an ELF file's DT_NEEDED entries and its PT_INTERP; a file
// that is not ELF needs nothing.
func elfNeeds(file string) ([]string, string, error) {
	f, err := elf.Open(file)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) || errors.Is(err, io.EOF) {
			return nil, "", nil
		}
		return nil, "", err
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, "", nil // no dynamic section: static or not an object
	}
	interp := ""
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(prog.Open())
			if err != nil {
				return nil, "", err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	return libs, interp, nil
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

// directDepends returns the real packages name Depends or Pre-Depends on
// (every alternative; virtual packages left out).
func directDepends(ctx context.Context, name string) ([]string, error) {
	out, err := run(ctx, "", "apt-cache", "depends", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances", name)
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
