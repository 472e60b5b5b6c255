package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	. "github.com/onsi/gomega"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// skipDirs are not scanned and may not be linked to: build and run outputs
// (.gitignore'd, absent from a fresh clone) and version control.
var skipDirs = []string{".git", "bin", "_out", filepath.Join("hack", "tools", "bin")}

// TestMarkdownLinks checks every relative link and anchor in the
// repository's Markdown files.
func TestMarkdownLinks(t *testing.T) {
	g := NewWithT(t)
	root, err := filepath.Abs("..")
	g.Expect(err).NotTo(HaveOccurred())
	files, err := markdownFiles(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(ContainElements(
		filepath.Join(root, "README.md"), filepath.Join(root, "docs", "architecture.md"), filepath.Join(root, "docs", "design.md")))
	broken, err := checkLinks(root, files)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(broken).To(BeEmpty(), "broken Markdown links (file: link: why)")
}

// TestCheckLinksFindsBrokenOnes runs the checker on a small tree with one
// link of each kind, so that TestMarkdownLinks cannot pass by checking
// nothing.
func TestCheckLinksFindsBrokenOnes(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
	write("docs/b.md", "# B title\n\n## Source tree\n\n## Source tree\n\n## 5.2 `make bench` (local)\n")
	write("cmd/x/main.go", "package main\n")
	write("_out/report.md", "# out\n")
	write("README.md", strings.Join([]string{
		"[ok file](docs/b.md) [ok anchor](docs/b.md#source-tree) [ok second](docs/b.md#source-tree-1)",
		"[ok punct](docs/b.md#52-make-bench-local) [ok dir](cmd/x) [ok self](#top) [ok web](https://kubevirt.io/x#y)",
		"[ok ref][r] [ok mail](mailto:a@b.c) ![ok img](docs/b.md)",
		"",
		"# Top",
		"",
		"`[in code](nowhere.md)`",
		"",
		"```",
		"[in a fence](nowhere.md)",
		"```",
		"",
		"[bad file](docs/none.md) [bad anchor](docs/b.md#nope) [bad self](#nope) [escapes](../x.md)",
		"[ignored output](_out/report.md) ![bad img](img/none.png) [bad ref][s]",
		"",
		"[r]: docs/b.md#b-title",
		"[s]: docs/gone.md",
	}, "\n"))
	files, err := markdownFiles(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(ConsistOf(filepath.Join(root, "README.md"), filepath.Join(root, "docs", "b.md")))
	broken, err := checkLinks(root, files)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(broken).To(ConsistOf(
		"README.md: docs/none.md: no such file or directory in the repository",
		"README.md: docs/b.md#nope: docs/b.md has no heading with ID \"nope\"",
		"README.md: #nope: README.md has no heading with ID \"nope\"",
		"README.md: ../x.md: points outside the repository",
		"README.md: _out/report.md: points into _out, which a clone does not have",
		"README.md: img/none.png: no such file or directory in the repository",
		"README.md: docs/gone.md: no such file or directory in the repository",
	))
}

func TestHeadingID(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Source tree", "source-tree"},
		{"1. Why Fastpath exists", "1-why-fastpath-exists"},
		{"5.2 Local node benchmark (no cluster)", "52-local-node-benchmark-no-cluster"},
		{"How a VM gets its fast-path address", "how-a-vm-gets-its-fast-path-address"},
		{"QEMU, libvirt and the kernel", "qemu-libvirt-and-the-kernel"},
		{"make_bench  §5", "make_bench--5"},
	} {
		t.Run(tc.heading, func(t *testing.T) {
			NewWithT(t).Expect(headingID(tc.heading)).To(Equal(tc.want))
		})
	}
}

// markdownFiles returns the *.md files under root, outside skipDirs, sorted.
func markdownFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && slices.Contains(skipDirs, rel) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// doc is a parsed Markdown file: its relative links and heading IDs.
type doc struct {
	links []string
	ids   map[string]bool
}

var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

// parse reads the links (inline, reference-style and images; not those in
// code) and the GitHub heading IDs of the Markdown file at path.
func parse(path string) (*doc, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &doc{ids: map[string]bool{}}
	seen := map[string]int{}
	err = ast.Walk(md.Parser().Parse(text.NewReader(src)), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			id := headingID(plainText(n, src))
			// GitHub numbers repeated IDs: x, x-1, x-2.
			if k := seen[id]; k > 0 {
				seen[id]++
				id = fmt.Sprintf("%s-%d", id, k)
			} else {
				seen[id] = 1
			}
			d.ids[id] = true
		case *ast.Link:
			d.links = append(d.links, string(n.Destination))
		case *ast.Image:
			d.links = append(d.links, string(n.Destination))
		}
		return ast.WalkContinue, nil
	})
	return d, err
}

// plainText is the text of n's inline children, code spans included.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			if t, ok := c.(*ast.Text); ok {
				b.Write(t.Segment.Value(src))
			}
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// headingID is the ID GitHub gives a heading: lower case, letters, digits,
// '-' and '_' kept, each space turned into '-', everything else dropped.
func headingID(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// checkLinks returns "<file>: <link>: <why>" for every broken relative link
// of files (paths under root).
func checkLinks(root string, files []string) ([]string, error) {
	docs := map[string]*doc{}
	load := func(p string) (*doc, error) {
		if d, ok := docs[p]; ok {
			return d, nil
		}
		d, err := parse(p)
		docs[p] = d
		return d, err
	}
	var broken []string
	for _, f := range files {
		d, err := load(f)
		if err != nil {
			return nil, err
		}
		relFile, _ := filepath.Rel(root, f)
		for _, link := range d.links {
			if why := check(root, f, link, load); why != "" {
				broken = append(broken, fmt.Sprintf("%s: %s: %s", filepath.ToSlash(relFile), link, why))
			}
		}
	}
	return broken, nil
}

// check returns why link, found in file from, is broken, or "".
func check(root, from, link string, load func(string) (*doc, error)) string {
	u, err := url.Parse(link)
	if err != nil {
		return "not a valid URL: " + err.Error()
	}
	if u.Scheme != "" || u.Host != "" {
		return "" // the web, mail: not ours to check
	}
	target := from
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			target = filepath.Join(root, filepath.FromSlash(u.Path))
		} else {
			target = filepath.Join(filepath.Dir(from), filepath.FromSlash(u.Path))
		}
	}
	rel, err := filepath.Rel(root, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "points outside the repository"
	}
	for _, s := range skipDirs {
		if rel == s || strings.HasPrefix(rel, s+string(filepath.Separator)) {
			return "points into " + s + ", which a clone does not have"
		}
	}
	st, err := os.Stat(target)
	if err != nil {
		return "no such file or directory in the repository"
	}
	if u.Fragment == "" || st.IsDir() || !strings.HasSuffix(target, ".md") {
		return ""
	}
	d, err := load(target)
	if err != nil {
		return err.Error()
	}
	if !d.ids[u.Fragment] {
		return fmt.Sprintf("%s has no heading with ID %q", filepath.ToSlash(rel), u.Fragment)
	}
	return ""
}
