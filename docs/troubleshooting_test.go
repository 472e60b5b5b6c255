package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	gast "github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// conditionConstants parses the Go file at path and returns the string
// constants named Reason* (reasons) and *Condition (condition types), each
// as value → constant names.
func conditionConstants(path string) (reasons, types map[string][]string, err error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, err
	}
	reasons, types = map[string][]string{}, map[string][]string{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				var into map[string][]string
				switch {
				case strings.HasPrefix(name.Name, "Reason"):
					into = reasons
				case strings.HasSuffix(name.Name, "Condition"):
					into = types
				default:
					continue
				}
				lit, ok := valueAt(vs, i).(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return nil, nil, fmt.Errorf("%s: constant %s is not a string literal", path, name.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: constant %s: %w", path, name.Name, err)
				}
				into[v] = append(into[v], name.Name)
			}
		}
	}
	return reasons, types, nil
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}

// tableKeys parses the Markdown file at path and returns, per table whose
// first header cell is "reason" or "type", the code span of each row's
// first cell, in file order; rows whose first cell is not one code span and
// rows with an empty cell are problems.
func tableKeys(path string) (keys map[string][]string, problems []string, err error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	keys = map[string][]string{}
	err = gast.Walk(md.Parser().Parse(text.NewReader(src)), func(n gast.Node, entering bool) (gast.WalkStatus, error) {
		table, ok := n.(*east.Table)
		if !entering || !ok {
			return gast.WalkContinue, nil
		}
		header, ok := table.FirstChild().(*east.TableHeader)
		if !ok || header.FirstChild() == nil {
			return gast.WalkSkipChildren, nil
		}
		column := strings.TrimSpace(plainText(header.FirstChild(), src))
		if column != "reason" && column != "type" {
			return gast.WalkSkipChildren, nil
		}
		for row := header.NextSibling(); row != nil; row = row.NextSibling() {
			first := row.FirstChild()
			code, ok := first.FirstChild().(*gast.CodeSpan)
			if !ok || first.ChildCount() != 1 {
				problems = append(problems, fmt.Sprintf("%s table: row %q: the first cell must be one `code` span", column, plainText(first, src)))
				continue
			}
			key := plainText(code, src)
			for cell := first.NextSibling(); cell != nil; cell = cell.NextSibling() {
				if strings.TrimSpace(plainText(cell, src)) == "" {
					problems = append(problems, fmt.Sprintf("%s table: row %s has an empty cell", column, key))
					break
				}
			}
			keys[column] = append(keys[column], key)
		}
		return gast.WalkSkipChildren, nil
	})
	return keys, problems, err
}

// compareRows returns what is wrong between the constants (value → names)
// and the rows of one table: a value without a row, a row without a
// constant, a row twice.
func compareRows(what string, consts map[string][]string, rows []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		switch {
		case seen[r]:
			out = append(out, fmt.Sprintf("%s %s has two rows", what, r))
		case consts[r] == nil:
			out = append(out, fmt.Sprintf("%s %s has a row but no constant in conditions.go", what, r))
		}
		seen[r] = true
	}
	for v, names := range consts {
		if !seen[v] {
			out = append(out, fmt.Sprintf("%s %s (%s) has no row", what, v, strings.Join(names, ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// checkTroubleshooting returns every mismatch between the Go file of
// condition constants and the Markdown page, and the numbers of reason and
// type rows checked.
func checkTroubleshooting(goFile, mdFile string) (mismatches []string, reasons, types int, err error) {
	rs, ts, err := conditionConstants(goFile)
	if err != nil {
		return nil, 0, 0, err
	}
	keys, problems, err := tableKeys(mdFile)
	if err != nil {
		return nil, 0, 0, err
	}
	mismatches = append(problems, compareRows("reason", rs, keys["reason"])...)
	mismatches = append(mismatches, compareRows("condition type", ts, keys["type"])...)
	return mismatches, len(rs), len(ts), nil
}

// TestTroubleshootingCoversEveryReason checks that docs/troubleshooting.md
// has one row per reason and per condition type of
// api/v1alpha1/conditions.go, and no row for one that no longer exists.
func TestTroubleshootingCoversEveryReason(t *testing.T) {
	g := NewWithT(t)
	root, err := filepath.Abs("..")
	g.Expect(err).NotTo(HaveOccurred())
	mismatches, reasons, types, err := checkTroubleshooting(
		filepath.Join(root, "api", "v1alpha1", "conditions.go"), filepath.Join(root, "docs", "troubleshooting.md"))
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("checked %d reasons and %d condition types", reasons, types)
	g.Expect(reasons).To(BeNumerically(">", 0), "no Reason* constant found: the parser is broken")
	g.Expect(types).To(BeNumerically(">", 0), "no *Condition constant found: the parser is broken")
	g.Expect(mismatches).To(BeEmpty(), "docs/troubleshooting.md against api/v1alpha1/conditions.go")
}

// TestCheckTroubleshootingFindsGaps runs the check on a small pair of files
// with one mismatch of each kind, so that the real check cannot pass by
// reading nothing.
func TestCheckTroubleshootingFindsGaps(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	goFile, mdFile := filepath.Join(dir, "conditions.go"), filepath.Join(dir, "t.md")
	g.Expect(os.WriteFile(goFile, []byte(`package v1alpha1

const (
	ReadyCondition = "Ready"
	GoneCondition  = "Gone"
)

const (
	ReasonReady = "Ready"
	ReasonA, ReasonB = "Alpha", "Beta"
	ReasonMissing = "Missing"
	NotAReason = "Ignored"
)
`), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(mdFile, []byte(strings.Join([]string{
		"| type | kind |",
		"|---|---|",
		"| `Ready` | X |",
		"",
		"| reason | cause |",
		"|---|---|",
		"| `Ready` | fine |",
		"| `Alpha` | a |",
		"| `Beta` | b |",
		"| `Beta` | again |",
		"| `Removed` | stale |",
		"| Plain | not code |",
		"| `Empty` | |",
		"",
		"| other | table |",
		"|---|---|",
		"| `Whatever` | ignored |",
	}, "\n")), 0o644)).To(Succeed())
	mismatches, reasons, types, err := checkTroubleshooting(goFile, mdFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reasons).To(Equal(4))
	g.Expect(types).To(Equal(2))
	g.Expect(mismatches).To(ConsistOf(
		"reason table: row \"Plain\": the first cell must be one `code` span",
		"reason table: row Empty has an empty cell",
		"reason Beta has two rows",
		"reason Removed has a row but no constant in conditions.go",
		"reason Empty has a row but no constant in conditions.go",
		"reason Missing (ReasonMissing) has no row",
		"condition type Gone (GoneCondition) has no row",
	))
}
