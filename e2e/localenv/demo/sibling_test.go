package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// The demo makes no default FastPathNetwork, so the Sibling attachment must
// name one of config/samples/ (issue 43: without spec.networkRef the operator
// refused it and the real-guest demo timed out).
func TestSiblingManifestNamesASampleNetwork(t *testing.T) {
	g := gomega.NewWithT(t)
	root, err := repoRoot()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	bridges, err := sampleBridges(filepath.Join(root, "config", "samples"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(bridges).NotTo(gomega.BeEmpty())

	var a fastpathv1alpha1.FastPathAttachment
	doc := strings.Split(siblingManifest(), "\n---")[0]
	g.Expect(yaml.UnmarshalStrict([]byte(doc), &a)).To(gomega.Succeed())
	g.Expect(a.Name).To(gomega.Equal(SiblingAttachment))
	g.Expect(a.Spec.VSOCK.Mode).To(gomega.Equal(fastpathv1alpha1.VSOCKModeSibling))
	g.Expect(a.Spec.Network).NotTo(gomega.BeNil())
	g.Expect(a.Spec.NetworkRef).NotTo(gomega.BeNil(), "spec.networkRef")
	g.Expect(sampleNetworkNames(t, filepath.Join(root, "config", "samples"))).To(gomega.ContainElement(a.Spec.NetworkRef.Name))
}

func sampleNetworkNames(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			var n fastpathv1alpha1.FastPathNetwork
			if yaml.Unmarshal([]byte(doc), &n) == nil && n.Kind == "FastPathNetwork" {
				names = append(names, n.Name)
			}
		}
	}
	return names
}

func TestRefusal(t *testing.T) {
	cond := func(typ, status, reason string, gen int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: "the message", ObservedGeneration: gen}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  string
	}{
		{name: "no conditions yet"},
		{name: "not ready yet", conds: []metav1.Condition{cond("Ready", "False", fastpathv1alpha1.ReasonNotReady, 2), cond("VMsWired", "False", fastpathv1alpha1.ReasonWiringFailed, 2)}},
		{name: "refused network", conds: []metav1.Condition{cond("NetworkAttachmentReady", "False", fastpathv1alpha1.ReasonNetworkRefused, 2)},
			want: "the operator refused FastPathAttachment apps/link: NetworkAttachmentReady=False (NetworkRefused): the message"},
		{name: "invalid spec", conds: []metav1.Condition{cond("Ready", "False", fastpathv1alpha1.ReasonInvalidSpec, 2)},
			want: "Ready=False (InvalidSpec): the message"},
		{name: "refused an older generation", conds: []metav1.Condition{cond("NetworkAttachmentReady", "False", fastpathv1alpha1.ReasonNetworkRefused, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			a := &fastpathv1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "link", Generation: 2}}
			a.Status.Conditions = tc.conds
			err := refusal(a)
			if tc.want == "" {
				g.Expect(err).NotTo(gomega.HaveOccurred())
				return
			}
			g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.want)))
		})
	}
}
