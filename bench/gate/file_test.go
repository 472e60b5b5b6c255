package gate_test

import (
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/bench/gate"
)

const benchmarkYAML = `apiVersion: fastpath.io/v1alpha1
kind: FastPathBenchmark
metadata:
  generateName: ci-
  namespace: apps
spec:
  attachmentRef: {name: db-link}
  mode: Pod
  successCriteria:
    minThroughputMbps: 5000
`

func TestDecodeBenchmark(t *testing.T) {
	g := gomega.NewWithT(t)
	b, err := gate.DecodeBenchmark(strings.NewReader("# the CI benchmark\n---\n" + benchmarkYAML + "---\n# nothing more\n"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(b.GenerateName).To(gomega.Equal("ci-"))
	g.Expect(b.Namespace).To(gomega.Equal("apps"))
	g.Expect(*b.Spec.SuccessCriteria.MinThroughputMbps).To(gomega.Equal(int64(5000)))

	b, err = gate.DecodeBenchmark(strings.NewReader(`{"apiVersion":"fastpath.io/v1alpha1","kind":"FastPathBenchmark","metadata":{"name":"ci"},"spec":{"attachmentRef":{"name":"a"},"mode":"Pod"}}`))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(b.Name).To(gomega.Equal("ci"))

	for _, tc := range []struct{ in, err string }{
		{"", "no FastPathBenchmark in it"},
		{"# only a comment\n", "no FastPathBenchmark in it"},
		{strings.Replace(benchmarkYAML, "successCriteria", "sucessCriteria", 1), `unknown field "spec.sucessCriteria"`},
		{benchmarkYAML + "---\n" + benchmarkYAML, "document 2 is a second FastPathBenchmark: bench run takes one"},
		{strings.Replace(benchmarkYAML, "FastPathBenchmark", "FastPathAttachment", 1), "document 1 is a FastPathAttachment, not a FastPathBenchmark"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", `no kind "ConfigMap" is registered`},
	} {
		_, err := gate.DecodeBenchmark(strings.NewReader(tc.in))
		g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.err)), "input %q", tc.in)
	}
}

// The file's namespace wins over the current one; -n naming another one
// is an error naming both.
func TestNamespace(t *testing.T) {
	g := gomega.NewWithT(t)
	for _, tc := range []struct{ file, flag, current, want string }{
		{"", "", "default", "default"},
		{"", "ci", "ci", "ci"},
		{"apps", "", "default", "apps"},
		{"apps", "apps", "apps", "apps"},
	} {
		ns, err := gate.Namespace(tc.file, tc.flag, tc.current)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(ns).To(gomega.Equal(tc.want))
	}
	_, err := gate.Namespace("apps", "ci", "ci")
	g.Expect(err).To(gomega.MatchError("the file's metadata.namespace apps and -n ci differ: drop one of them"))
}
