package docs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/config/crd"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// The rule for YAML in the docs (README.md and docs/*.md):
//
//   - Every YAML document of a ```yaml (or ```yml) fence that has an
//     apiVersion of group fastpath.io or a kind of one of its CRDs is a
//     manifest: it must have both, a served version and metadata.name, and
//     a server-side dry-run create (strict field validation) against the
//     CRDs of config/crd/bases must accept it. Namespaced kinds are created
//     in a test namespace, whatever namespace the document names.
//   - A document with neither apiVersion nor kind is a fragment (a spec or a
//     status excerpt) and is skipped, as are documents of other groups
//     (KubeVirt, kustomize).
//   - A fence may opt out with an HTML comment right before it,
//     `<!-- not-validated: why -->`; the reason is required.
//   - A Fastpath manifest in a fence of another language (sh, json, none) is
//     an error: label it yaml, so that it is checked, or opt it out.

// notValidated is the opt-out comment; its group is the reason.
var notValidated = regexp.MustCompile(`^<!--\s*not-validated:\s*(.*?)\s*-->\s*$`)

// fastpathManifestLine finds a Fastpath kind or apiVersion in a fence of
// another language.
var fastpathManifestLine = regexp.MustCompile(`(?m)^[\s-]*(kind:\s*FastPath|apiVersion:\s*fastpath\.io/)`)

// apiOf is what the docs may declare: the group of the CRDs, the versions
// they serve, and the kinds.
type apiOf struct {
	group    string
	versions map[string]bool
	kinds    map[string]bool
}

// fastpathAPI reads the group, versions and kinds of config/crd/bases.
func fastpathAPI() (apiOf, error) {
	crds, err := crd.Bases()
	if err != nil {
		return apiOf{}, err
	}
	a := apiOf{versions: map[string]bool{}, kinds: map[string]bool{}}
	for _, c := range crds {
		a.group = c.Spec.Group
		a.kinds[c.Spec.Names.Kind] = true
		for _, v := range c.Spec.Versions {
			if v.Served {
				a.versions[c.Spec.Group+"/"+v.Name] = true
			}
		}
	}
	return a, nil
}

// manifest is one Fastpath YAML document of the docs.
type manifest struct {
	// where is "<file>:<line of the fence's first line>" and, in a fence of
	// several documents, " document <n>".
	where string
	obj   *unstructured.Unstructured
}

// docYAML is what scanYAML found in a set of Markdown files.
type docYAML struct {
	manifests []manifest
	// fragments counts documents with neither apiVersion nor kind, others
	// those of other groups.
	fragments, others int
	// optedOut is "<where>: <reason>" per fence skipped by its comment.
	optedOut []string
	// problems are "<where>: <what>": documents that break the rule.
	problems []string
}

// docFiles are the Markdown files whose YAML is checked: README.md and
// docs/*.md under root.
func docFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files = append(files, filepath.Join(root, "README.md"))
	slices.Sort(files)
	return files, nil
}

// scanYAML parses files (paths under root) with goldmark and sorts every
// YAML document of their fences by the rule above.
func scanYAML(root string, files []string, api apiOf) (*docYAML, error) {
	out := &docYAML{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, f)
		rel = filepath.ToSlash(rel)
		err = ast.Walk(md.Parser().Parse(text.NewReader(src)), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			fence, ok := n.(*ast.FencedCodeBlock)
			if !entering || !ok {
				return ast.WalkContinue, nil
			}
			var body bytes.Buffer
			lines := fence.Lines()
			for i := 0; i < lines.Len(); i++ {
				seg := lines.At(i)
				body.Write(seg.Value(src))
			}
			where := rel
			if lines.Len() > 0 {
				where = fmt.Sprintf("%s:%d", rel, bytes.Count(src[:lines.At(0).Start], []byte("\n"))+1)
			}
			if reason, ok := optOut(fence.PreviousSibling(), src); ok {
				if reason == "" {
					out.problems = append(out.problems, where+": <!-- not-validated: --> needs a reason")
				} else {
					out.optedOut = append(out.optedOut, where+": "+reason)
				}
				return ast.WalkSkipChildren, nil
			}
			switch lang := string(fence.Language(src)); lang {
			case "yaml", "yml":
				out.add(where, body.Bytes(), api)
			default:
				if fastpathManifestLine.Match(body.Bytes()) {
					out.problems = append(out.problems, fmt.Sprintf("%s: a Fastpath manifest in a %q fence: label it yaml so it is validated, or opt out", where, lang))
				}
			}
			return ast.WalkSkipChildren, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// optOut returns the reason of a `<!-- not-validated: reason -->` comment
// n, and whether n is one.
func optOut(n ast.Node, src []byte) (string, bool) {
	h, ok := n.(*ast.HTMLBlock)
	if !ok {
		return "", false
	}
	var b strings.Builder
	lines := h.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(src))
	}
	if h.HasClosure() {
		b.Write(h.ClosureLine.Value(src))
	}
	m := notValidated.FindStringSubmatch(strings.TrimSpace(b.String()))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// add sorts the YAML documents of one fence.
func (d *docYAML) add(where string, body []byte, api apiOf) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(body)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.problems = append(d.problems, fmt.Sprintf("%s: %v", where, err))
			return
		}
		docs = append(docs, doc)
	}
	for i, doc := range docs {
		w := where
		if len(docs) > 1 {
			w = fmt.Sprintf("%s document %d", where, i+1)
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			d.problems = append(d.problems, fmt.Sprintf("%s: not YAML: %v", w, err))
			continue
		}
		if len(obj) == 0 {
			continue // only comments, or the empty document before a leading ---
		}
		av, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		switch {
		case av == "" && kind == "":
			d.fragments++
		case !strings.HasPrefix(av, api.group+"/") && !api.kinds[kind]:
			d.others++
		case av == "" || kind == "":
			d.problems = append(d.problems, fmt.Sprintf("%s: %s%s without both apiVersion and kind: give it both (and metadata.name), or opt out", w, av, kind))
		case !api.versions[av] || !api.kinds[kind]:
			d.problems = append(d.problems, fmt.Sprintf("%s: apiVersion %s kind %s is not served by config/crd/bases", w, av, kind))
		default:
			d.manifests = append(d.manifests, manifest{where: w, obj: &unstructured.Unstructured{Object: obj}})
		}
	}
}

// dryRun creates each manifest with a server-side dry run and strict field
// validation, namespaced ones in ns, and returns "<where> (<kind> <name>):
// <error>" for each the API server refuses.
func dryRun(ctx context.Context, c client.Client, ns string, ms []manifest) ([]string, error) {
	var refused []string
	for _, m := range ms {
		obj := m.obj.DeepCopy()
		namespaced, err := c.IsObjectNamespaced(obj)
		if err != nil {
			return nil, fmt.Errorf("failed to find the scope of %s (%s): %w", obj.GetKind(), m.where, err)
		}
		if namespaced {
			obj.SetNamespace(ns)
		}
		if err := c.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
			refused = append(refused, fmt.Sprintf("%s (%s %s): %v", m.where, obj.GetKind(), obj.GetName(), err))
		}
	}
	return refused, nil
}

// TestDocManifestsAreAccepted validates every Fastpath manifest of README.md
// and docs/*.md against the CRDs, by the rule above.
func TestDocManifestsAreAccepted(t *testing.T) {
	g := NewWithT(t)
	root, err := filepath.Abs("..")
	g.Expect(err).NotTo(HaveOccurred())
	api, err := fastpathAPI()
	g.Expect(err).NotTo(HaveOccurred())
	files, err := docFiles(root)
	g.Expect(err).NotTo(HaveOccurred())
	found, err := scanYAML(root, files, api)
	g.Expect(err).NotTo(HaveOccurred())

	env, err := testenv.Start(testenv.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Log(err)
		}
	})
	ctx := context.Background()
	ns, err := env.NewNamespace(ctx, "docs")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	// The validator itself: a manifest the CRD refuses (tso: On is a YAML
	// boolean, not the string "On") and one with a field it does not know.
	probe := &docYAML{}
	probe.add("probe", []byte(strings.Join([]string{
		"apiVersion: fastpath.io/v1alpha1",
		"kind: FastPathNetwork",
		"metadata: {name: probe-bool}",
		"spec: {bridge: fastpath0, namespaceSelector: {}, offloads: {tso: On}}",
		"---",
		"apiVersion: fastpath.io/v1alpha1",
		"kind: FastPathNetwork",
		"metadata: {name: probe-unknown}",
		"spec: {bridge: fastpath0, namespaceSelector: {}, bridgeMTU: 9000}",
	}, "\n")), api)
	g.Expect(probe.problems).To(BeEmpty())
	refused, err := dryRun(ctx, env.Client, ns, probe.manifests)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refused).To(ConsistOf(ContainSubstring("spec.offloads.tso"), ContainSubstring("bridgeMTU")))

	refused, err = dryRun(ctx, env.Client, ns, found.manifests)
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string]int{}
	for _, m := range found.manifests {
		kinds[m.obj.GetKind()]++
	}
	t.Logf("validated %d Fastpath manifests %v in %d files; skipped %d fragments (no apiVersion, no kind), %d documents of other groups, %d opted-out fences %q",
		len(found.manifests), kinds, len(files), found.fragments, found.others, len(found.optedOut), found.optedOut)
	g.Expect(found.manifests).NotTo(BeEmpty(), "no Fastpath manifest found in the docs: the scan is broken")
	g.Expect(append(found.problems, refused...)).To(BeEmpty(),
		"YAML in the docs that breaks the rule of manifests_test.go, or that the CRDs refuse")
}

// TestScanYAMLSortsFences runs the scan on a small Markdown file with one
// fence of each case, so that TestDocManifestsAreAccepted cannot pass by
// finding nothing.
func TestScanYAMLSortsFences(t *testing.T) {
	g := NewWithT(t)
	api, err := fastpathAPI()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api.kinds).To(HaveLen(4))
	root := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(root, "docs"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(root, "README.md"), []byte(strings.Join([]string{
		"# T", // 1
		"",
		"```yaml",
		"apiVersion: fastpath.io/v1alpha1", // 4: a manifest
		"kind: FastPathNetwork",
		"metadata: {name: a}",
		"---",
		"kind: FastPathAttachment", // half declared
		"metadata: {name: b}",
		"---",
		"apiVersion: kubevirt.io/v1", // another group
		"kind: VirtualMachine",
		"```",
		"",
		"```yaml",
		"spec: {mtu: 9000}", // 16: a fragment
		"```",
		"",
		"<!-- not-validated: deliberately wrong -->",
		"",
		"```yaml",
		"apiVersion: fastpath.io/v1alpha1", // 22: opted out
		"kind: FastPathNode",
		"```",
		"",
		"<!-- not-validated: -->",
		"```yml",
		"kind: FastPathBenchmark", // 28: opt-out without a reason
		"```",
		"",
		"```sh",
		"kubectl apply -f - <<EOF", // 32: not labelled yaml
		"apiVersion: fastpath.io/v1alpha1",
		"EOF",
		"```",
		"",
		"- item",
		"",
		"  ```yaml",
		"  apiVersion: fastpath.io/v1beta9", // 40: in a list, unserved version
		"  kind: FastPathNode",
		"  ```",
	}, "\n")), 0o644)).To(Succeed())
	files, err := docFiles(root)
	g.Expect(err).NotTo(HaveOccurred())
	found, err := scanYAML(root, files, api)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found.manifests).To(HaveLen(1))
	g.Expect(found.manifests[0].where).To(Equal("README.md:4 document 1"))
	g.Expect(found.manifests[0].obj.GetName()).To(Equal("a"))
	g.Expect(found.fragments).To(Equal(1))
	g.Expect(found.others).To(Equal(1))
	g.Expect(found.optedOut).To(Equal([]string{"README.md:22: deliberately wrong"}))
	g.Expect(found.problems).To(ConsistOf(
		"README.md:4 document 2: FastPathAttachment without both apiVersion and kind: give it both (and metadata.name), or opt out",
		"README.md:28: <!-- not-validated: --> needs a reason",
		"README.md:32: a Fastpath manifest in a \"sh\" fence: label it yaml so it is validated, or opt out",
		"README.md:40: apiVersion fastpath.io/v1beta9 kind FastPathNode is not served by config/crd/bases",
	))
}
