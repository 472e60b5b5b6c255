package v1alpha1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// TestCRDBoundsAreWellKnown: controller-gen takes validation bounds and
// enums only as literals in +kubebuilder markers, so the generated CRDs
// (config/crd/bases) are read back here: every MTU of a spec in them (an "mtu"
// integer, or the fields of an "mtu" object) is bounded by
// wellknown.MinMTU-wellknown.MaxMTU, and every "datapath" enum lists the
// wellknown datapath names.
func TestCRDBoundsAreWellKnown(t *testing.T) {
	g := NewWithT(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	var mtus, datapaths int
	var walk func(path string, name string, node any)
	walk = func(path, name string, node any) {
		m, ok := node.(map[string]any)
		if !ok {
			if l, ok := node.([]any); ok {
				for _, e := range l {
					walk(path, name, e)
				}
			}
			return
		}
		if m["type"] == "integer" && strings.Contains(path, "/spec/") && (name == "mtu" || filepath.Base(filepath.Dir(path)) == "mtu") {
			mtus++
			g.Expect(m["minimum"]).To(BeNumerically("==", wellknown.MinMTU), path)
			g.Expect(m["maximum"]).To(BeNumerically("==", wellknown.MaxMTU), path)
		}
		if name == "datapath" && m["enum"] != nil {
			datapaths++
			g.Expect(m["enum"]).To(ConsistOf(wellknown.DatapathLinuxBridge, wellknown.DatapathOVS, wellknown.DatapathMacvtap), path)
		}
		for k, v := range m {
			if k == "properties" {
				for pk, pv := range v.(map[string]any) {
					walk(path+"/"+pk, pk, pv)
				}
				continue
			}
			walk(path, name, v)
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		var crd any
		g.Expect(yaml.Unmarshal(data, &crd)).To(Succeed(), f)
		walk(filepath.Base(f), "", crd)
	}
	g.Expect(mtus).To(BeNumerically(">=", 4), "the attachment's mtu and the network's mtu default, min and max")
	g.Expect(datapaths).To(BeNumerically(">=", 2), "the attachment's and the network's datapath")
}

// TestCRDSSHUserIsWellKnown: the CEL rule of FastPathBenchmark spec.sshUser
// is wellknown.SSHUserPattern, which the runner checks too, and its length
// bound wellknown.SSHUserMaxLength.
func TestCRDSSHUserIsWellKnown(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "fastpath.io_fastpathbenchmarks.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Properties map[string]struct {
									MaxLength   int `json:"maxLength"`
									Validations []struct {
										Rule    string `json:"rule"`
										Message string `json:"message"`
									} `json:"x-kubernetes-validations"`
								} `json:"properties"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	g.Expect(yaml.Unmarshal(data, &crd)).To(Succeed())
	g.Expect(crd.Spec.Versions).NotTo(BeEmpty())
	for _, v := range crd.Spec.Versions {
		f := v.Schema.OpenAPIV3Schema.Properties.Spec.Properties["sshUser"]
		g.Expect(f.MaxLength).To(Equal(wellknown.SSHUserMaxLength))
		g.Expect(f.Validations).To(HaveLen(1))
		g.Expect(f.Validations[0].Rule).To(Equal("self.matches('" + wellknown.SSHUserPattern + "')"))
		g.Expect(f.Validations[0].Message).To(HavePrefix("sshUser must be a POSIX user name"))
	}
}
