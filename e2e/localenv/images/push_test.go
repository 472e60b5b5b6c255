package images

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sirupsen/logrus"
	"sigs.k8s.io/yaml"
)

// startRegistry serves a real OCI registry (distribution v3, the registry
// behind Docker Hub's and most others' API, with in-memory storage) on a
// random loopback port for the test and returns its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	logrus.SetOutput(io.Discard)
	cfg := &configuration.Configuration{Storage: configuration.Storage{"inmemory": configuration.Parameters{}}}
	cfg.HTTP.Secret = "fastpath-push-test"
	cfg.Log.AccessLog.Disabled = true
	srv := httptest.NewServer(handlers.NewApp(context.Background(), cfg))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// smallArchives writes an archive per target into a temporary directory, as
// Build names them, each a small image of its own (two files), so the test
// pushes what `make images` writes without building the real images.
func smallArchives(t *testing.T, targets []Target) string {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	for _, tg := range targets {
		l, err := Layer([]File{Content("/name", 0o644, []byte(tg.Name)), Content("/etc/os-release", 0o644, []byte("ID=test\n"))})
		g.Expect(err).NotTo(HaveOccurred())
		img, err := Image([]LayerSpec{{Layer: l, CreatedBy: "test"}}, Config{Entrypoint: tg.Entrypoint, User: tg.User})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(WriteArchive(filepath.Join(dir, tg.Name+".tar"), tg.Ref, img)).To(Succeed())
	}
	return dir
}

// make push puts every image of `make images` into a real registry: each one
// is served under <registry>/<repository>:<tag> with the digest Push printed,
// that digest is the archive's image's, the image pulled by digest is the one
// archived, and the values file installs the chart's images by those digests.
func TestPushPutsEveryImageIntoARegistry(t *testing.T) {
	g := NewWithT(t)
	targets, err := Targets(filepath.Join("..", "..", ".."))
	g.Expect(err).NotTo(HaveOccurred())
	out := smallArchives(t, targets)
	host := startRegistry(t)
	registry := host + "/fastpath"

	var log strings.Builder
	p := &Push{Out: out, Registry: registry, Tag: "0.1.0-test", Log: &log}
	pushed, err := p.Push(context.Background(), targets)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pushed).To(HaveLen(len(targets)))

	digests, err := os.ReadFile(filepath.Join(out, DigestsFile))
	g.Expect(err).NotTo(HaveOccurred())
	var want []string
	for i, r := range pushed {
		tg := targets[i]
		repo, err := Repository(tg)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(repo).NotTo(ContainSubstring("localhost"))
		g.Expect(r.Ref).To(Equal(registry + "/" + repo + ":0.1.0-test"))
		g.Expect(log.String()).To(ContainSubstring("pushed " + r.Ref + "@" + r.Digest.String()))
		want = append(want, r.Ref+"@"+r.Digest.String())

		// What the registry serves under the tag is the digest printed.
		tag, err := name.NewTag(r.Ref)
		g.Expect(err).NotTo(HaveOccurred())
		desc, err := remote.Head(tag)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(desc.Digest).To(Equal(r.Digest), tg.Name)

		// Pulled by digest, it is the archived image, layer for layer.
		byDigest, err := name.NewDigest(registry + "/" + repo + "@" + r.Digest.String())
		g.Expect(err).NotTo(HaveOccurred())
		pulled, err := remote.Image(byDigest)
		g.Expect(err).NotTo(HaveOccurred())
		archived, err := ReadArchive(filepath.Join(out, tg.Name+".tar"), t.TempDir())
		g.Expect(err).NotTo(HaveOccurred())
		wantDigest, err := archived[0].Image.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Digest).To(Equal(wantDigest), "%s: the digest printed is the archive's image", tg.Name)
		gotManifest, err := pulled.RawManifest()
		g.Expect(err).NotTo(HaveOccurred())
		wantManifest, err := archived[0].Image.RawManifest()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(gotManifest)).To(Equal(string(wantManifest)), tg.Name)
		cf, err := pulled.ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cf.Config.Entrypoint).To(Equal(tg.Entrypoint))
	}
	g.Expect(strings.Split(strings.TrimSpace(string(digests)), "\n")).To(Equal(want))

	// The values file names the registry, the tag and each chart image's
	// repository and digest; pause, which the chart does not run, is not in it.
	b, err := os.ReadFile(filepath.Join(out, ValuesFile))
	g.Expect(err).NotTo(HaveOccurred())
	var values struct {
		Image map[string]any `json:"image"`
	}
	g.Expect(yaml.Unmarshal(b, &values)).To(Succeed(), string(b))
	g.Expect(values.Image).To(HaveKeyWithValue("registry", registry))
	g.Expect(values.Image).To(HaveKeyWithValue("tag", "0.1.0-test"))
	g.Expect(values.Image).To(HaveLen(2 + len(targets) - 1))
	for _, r := range pushed {
		key := ChartKey(r.Target)
		if r.Target.Name == "pause" {
			g.Expect(key).To(BeEmpty())
			continue
		}
		repo, _ := Repository(r.Target)
		g.Expect(values.Image).To(HaveKeyWithValue(key, map[string]any{"repository": repo, "digest": r.Digest.String()}))
	}
}

// A push before `make images` says so, and a registry that refuses is an error.
func TestPushErrors(t *testing.T) {
	g := NewWithT(t)
	targets := []Target{pauseTarget}
	p := &Push{Out: t.TempDir(), Registry: startRegistry(t) + "/fp", Tag: "t"}
	_, err := p.Push(context.Background(), targets)
	g.Expect(err).To(MatchError(ContainSubstring("failed to find the archive of pause (run `make images` first)")))

	out := smallArchives(t, targets)
	srv := httptest.NewServer(nil) // answers 404 to everything: no registry
	t.Cleanup(srv.Close)
	p = &Push{Out: out, Registry: strings.TrimPrefix(srv.URL, "http://") + "/fp", Tag: "t"}
	_, err = p.Push(context.Background(), targets)
	g.Expect(err).To(MatchError(ContainSubstring("failed to push pause to")))
	_, err = os.Stat(filepath.Join(out, DigestsFile))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "no digests file for a failed push")

	_, err = (&Push{Out: out, Registry: "", Tag: "t"}).Push(context.Background(), targets)
	g.Expect(err).To(MatchError(ContainSubstring("a registry and a tag are needed")))
}

func TestChartKeyAndRepository(t *testing.T) {
	g := NewWithT(t)
	for stage, want := range map[string]string{"operator": "operator", "domain-hook": "domainHook", "": ""} {
		g.Expect(ChartKey(Target{Stage: stage})).To(Equal(want))
	}
	for ref, want := range map[string]string{
		PauseRef:                             "pause",
		componentRef("domain-hook"):          "fastpath-domain-hook",
		"localhost/kubevirt/virt-api:v1.7.0": "kubevirt/virt-api",
	} {
		got, err := Repository(Target{Name: "x", Ref: ref})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want))
	}
	for _, ref := range []string{"ghcr.io/fastpath-io/fastpath-agent:1", "localhost/fastpath-agent", "localhost:5000/a:b"} {
		_, err := Repository(Target{Name: "x", Ref: ref})
		g.Expect(err).To(MatchError(ContainSubstring("is not localhost/<repository>:<tag>")), ref)
	}
}

// The chart runs every Dockerfile image under the key and repository Push
// writes into ValuesFile, and no other: a new Dockerfile target without its
// chart values, or a renamed repository, fails here.
func TestChartValuesNameEveryDockerfileImage(t *testing.T) {
	g := NewWithT(t)
	root := filepath.Join("..", "..", "..")
	targets, err := Targets(root)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := os.ReadFile(filepath.Join(root, "charts", "fastpath", "values.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var values struct {
		Image map[string]any `json:"image"`
	}
	g.Expect(yaml.Unmarshal(b, &values)).To(Succeed())
	want := map[string]any{}
	for _, tg := range targets {
		if key := ChartKey(tg); key != "" {
			repo, err := Repository(tg)
			g.Expect(err).NotTo(HaveOccurred())
			want[key] = map[string]any{"repository": repo, "tag": "", "digest": ""}
		}
	}
	g.Expect(want).To(HaveLen(5))
	for k, v := range values.Image {
		if _, ok := v.(map[string]any); ok {
			g.Expect(want).To(HaveKeyWithValue(k, v), "chart value image.%s", k)
		}
	}
	for k, v := range want {
		g.Expect(values.Image).To(HaveKeyWithValue(k, v), "image %s has no chart values", k)
	}
}
