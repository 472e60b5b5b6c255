package fastpath_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// renderedImages returns every image the chart renders with the given --set
// values (or -f files, as "-f=<file>"): "<kind>/<name>/<container>" → image
// for each container and init container, and "operator/--runner-image",
// "operator/--domain-hook-image" for the images the operator passes on.
func renderedImages(t *testing.T, set ...string) map[string]string {
	t.Helper()
	var sets []string
	var files []string
	for _, s := range set {
		if f, ok := strings.CutPrefix(s, "-f="); ok {
			files = append(files, f)
		} else {
			sets = append(sets, s)
		}
	}
	out := map[string]string{}
	args := []string{"template", "fp", ".", "--namespace", "fastpath-system"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	for _, doc := range strings.Split(helm(t, args...), "\n---") {
		var o renderedObject
		NewWithT(t).Expect(yaml.Unmarshal([]byte(doc), &o)).To(Succeed(), doc)
		for _, c := range append(o.Spec.Template.Spec.InitContainers, o.Spec.Template.Spec.Containers...) {
			out[o.Kind+"/"+o.Metadata.Name+"/"+c.Name] = c.Image
			if o.Kind != "Deployment" {
				continue
			}
			for _, a := range c.Args {
				for _, flag := range []string{"--runner-image", "--domain-hook-image"} {
					if v, ok := strings.CutPrefix(a, flag+"="); ok {
						out["operator/"+flag] = v
					}
				}
			}
		}
	}
	return out
}

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	digestC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	digestD = "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
	digestE = "sha256:eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
)

// Where each image goes: every container and operator flag that names one.
var imageUses = map[string]string{
	"Deployment/fastpath-operator/operator":              "operator",
	"Job/fastpath-unregister-binding-plugins/unregister": "operator",
	"Job/fastpath-node-cleanup/cleanup":                  "operator",
	"DaemonSet/fastpath-agent/install-cni":               "agent",
	"DaemonSet/fastpath-agent/agent":                     "agent",
	// The relay's DaemonSet (agent.relay.backend.enabled, the default).
	"DaemonSet/fastpath-vsock-backend/vsock-backend": "vsockBackend",
	"operator/--runner-image":                        "bench",
	"operator/--domain-hook-image":                   "domainHook",
}

// Each image renders <registry>/<repository>@<digest> when its digest is
// given, else <registry>/<repository>:<tag>, its own tag before image.tag
// before the chart's appVersion; a digest that is not sha256:<64 hex> fails.
func TestChartRendersImagesByDigest(t *testing.T) {
	g := NewWithT(t)
	repo := map[string]string{"operator": "fastpath-operator", "agent": "fastpath-agent", "bench": "fastpath-bench", "domainHook": "fastpath-domain-hook",
		"vsockBackend": "fastpath-vsock-backend"}
	digest := map[string]string{"operator": digestA, "agent": digestB, "bench": digestC, "domainHook": digestD, "vsockBackend": digestE}

	expect := func(got map[string]string, want func(key string) string) {
		t.Helper()
		for use, key := range imageUses {
			g.ExpectWithOffset(1, got).To(HaveKeyWithValue(use, want(key)), use)
		}
		g.ExpectWithOffset(1, got).To(HaveLen(len(imageUses)), "every image the chart renders is in imageUses")
	}

	// By tag: the chart's appVersion, then image.tag, then the image's own tag.
	expect(renderedImages(t), func(k string) string { return "ghcr.io/fastpath-io/" + repo[k] + ":0.1.0" })
	expect(renderedImages(t, "image.registry=reg.example.com:5000/fp/", "image.tag=v2", "image.agent.tag=v3"), func(k string) string {
		if k == "agent" {
			return "reg.example.com:5000/fp/fastpath-agent:v3"
		}
		return "reg.example.com:5000/fp/" + repo[k] + ":v2"
	})

	// By digest, each image its own, the tag then ignored.
	var set []string
	for k, d := range digest {
		set = append(set, "image."+k+".digest="+d)
	}
	expect(renderedImages(t, append(set, "image.tag=v2")...), func(k string) string { return "ghcr.io/fastpath-io/" + repo[k] + "@" + digest[k] })

	// One digest given: that image by digest, the others by tag.
	expect(renderedImages(t, "image.bench.digest="+digestC), func(k string) string {
		if k == "bench" {
			return "ghcr.io/fastpath-io/fastpath-bench@" + digestC
		}
		return "ghcr.io/fastpath-io/" + repo[k] + ":0.1.0"
	})

	// A values file as make push writes it (_out/images/values-digests.yaml).
	f := filepath.Join(t.TempDir(), "values-digests.yaml")
	var b strings.Builder
	b.WriteString("image:\n  registry: 127.0.0.1:5000/fastpath\n  tag: \"0.1.0\"\n")
	for k, d := range digest {
		b.WriteString("  " + k + ":\n    repository: " + repo[k] + "\n    digest: " + d + "\n")
	}
	g.Expect(os.WriteFile(f, []byte(b.String()), 0o644)).To(Succeed())
	expect(renderedImages(t, "-f="+f), func(k string) string { return "127.0.0.1:5000/fastpath/" + repo[k] + "@" + digest[k] })

	// An empty registry leaves the repository whole; operator.domainHookImage still wins.
	got := renderedImages(t, "image.registry=", "image.operator.repository=quay.io/own/op", "operator.domainHookImage=own/hook:1")
	g.Expect(got).To(HaveKeyWithValue("Deployment/fastpath-operator/operator", "quay.io/own/op:0.1.0"))
	g.Expect(got).To(HaveKeyWithValue("operator/--domain-hook-image", "own/hook:1"))
}

func TestChartRefusesABadDigest(t *testing.T) {
	g := NewWithT(t)
	for _, d := range []string{"sha256:abc", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", strings.ToUpper(digestA)} {
		out, err := helmRun(t, "template", "fp", ".", "--api-versions", vapAPI, "--set", "image.agent.digest="+d)
		g.Expect(err).To(HaveOccurred(), d)
		g.Expect(out).To(ContainSubstring("image.agent.digest"), d)
		g.Expect(out).To(ContainSubstring("want sha256:<64 lowercase hex digits>"), d)
	}
	out, err := helmRun(t, "template", "fp", ".", "--api-versions", vapAPI, "--set", "image.bench.repository=")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("image.bench.repository is required"))
}
