package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// DigestsFile and ValuesFile are what Push writes beside the archives:
// DigestsFile one line `<repository>:<tag>@<digest>` per pushed image,
// ValuesFile the chart values that install those images by digest
// (`helm install -f <out>/values-digests.yaml`, docs/install.md).
const (
	DigestsFile = "digests.txt"
	ValuesFile  = "values-digests.yaml"
)

// Push is what `make push` does with the archives `make images` wrote.
type Push struct {
	// Out is the directory of the archives (<Out>/<name>.tar), where the
	// digests files go too.
	Out string
	// Registry is the repository prefix, host[:port][/path], e.g.
	// "ghcr.io/fastpath-io" or "127.0.0.1:5000/fastpath".
	Registry string
	// Tag is the tag every image gets, e.g. "0.1.0".
	Tag string
	// Insecure pushes over plain HTTP (go-containerregistry already does
	// for localhost and loopback addresses).
	Insecure bool
	// Remote are further options of go-containerregistry's remote package;
	// Push adds the context and the default keychain (~/.docker/config.json,
	// as `docker login` and `crane auth login` write it).
	Remote []remote.Option
	// Log gets a line per image pushed; nil discards.
	Log io.Writer
}

// Pushed is one image in the registry.
type Pushed struct {
	Target Target
	// Ref is <Registry>/<repository>:<Tag>.
	Ref string
	// Digest is the manifest's digest, what the registry serves for Ref.
	Digest v1.Hash
}

// Repository returns the repository of a Target's image without the
// registry, as the chart names it: "fastpath-operator" for
// localhost/fastpath-operator:local, "pause" for the pause image,
// "kubevirt/virt-api" for KubeVirt's. (go-containerregistry's name package
// reads "localhost/x" as Docker Hub's repository localhost/x, so the local
// Registry is cut here.)
func Repository(t Target) (string, error) {
	rest, ok := strings.CutPrefix(t.Ref, Registry+"/")
	if i := strings.LastIndex(rest, ":"); ok && i > 0 && !strings.Contains(rest[i:], "/") {
		return rest[:i], nil
	}
	return "", fmt.Errorf("failed to read the repository of %s: image name %q is not %s/<repository>:<tag>", t.Name, t.Ref, Registry)
}

// ChartKey is the key of a Dockerfile image under the chart's `image:`
// values (image.<key>.repository, .tag, .digest): its stage in lower
// camelCase, "domainHook" for domain-hook. Pause and KubeVirt's images,
// which the chart does not run, have none ("").
func ChartKey(t Target) string {
	if t.Stage == "" {
		return ""
	}
	parts := strings.Split(t.Stage, "-")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}

// Push pushes the archive of each target, <Out>/<name>.tar (one image each,
// as Build writes them), to <Registry>/<repository>:<Tag> and then writes
// DigestsFile and ValuesFile into Out. Errors: an archive missing (build it
// first) or unreadable, a bad registry name, the registry refusing the push.
func (p *Push) Push(ctx context.Context, targets []Target) ([]Pushed, error) {
	if p.Registry == "" || p.Tag == "" {
		return nil, fmt.Errorf("failed to push the images: a registry and a tag are needed (got %q, %q)", p.Registry, p.Tag)
	}
	var nameOpts []name.Option
	if p.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	opts := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, p.Remote...)
	var out []Pushed
	for _, t := range targets {
		repo, err := Repository(t)
		if err != nil {
			return out, err
		}
		ref, err := name.NewTag(strings.TrimSuffix(p.Registry, "/")+"/"+repo+":"+p.Tag, nameOpts...)
		if err != nil {
			return out, fmt.Errorf("failed to name image %s in registry %s: %w", t.Name, p.Registry, err)
		}
		digest, err := p.pushOne(t, ref, opts)
		if err != nil {
			return out, err
		}
		if p.Log != nil {
			fmt.Fprintf(p.Log, "images: pushed %s@%s\n", ref, digest)
		}
		out = append(out, Pushed{Target: t, Ref: ref.String(), Digest: digest})
	}
	return out, p.writeDigests(out)
}

// pushOne pushes the one image of t's archive to ref and returns its digest.
// The archive is unpacked into a temporary directory, removed afterwards.
func (p *Push) pushOne(t Target, ref name.Tag, opts []remote.Option) (v1.Hash, error) {
	path := filepath.Join(p.Out, t.Name+".tar")
	if _, err := os.Stat(path); err != nil {
		return v1.Hash{}, fmt.Errorf("failed to find the archive of %s (run `make images` first): %w", t.Name, err)
	}
	dir, err := os.MkdirTemp("", "fastpath-push-"+t.Name+"-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	imgs, err := ReadArchive(path, dir)
	if err != nil {
		return v1.Hash{}, err
	}
	if len(imgs) != 1 {
		return v1.Hash{}, fmt.Errorf("failed to push %s: archive %s holds %d images, want 1", t.Name, path, len(imgs))
	}
	digest, err := imgs[0].Image.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("failed to compute the digest of %s: %w", t.Name, err)
	}
	if err := remote.Write(ref, imgs[0].Image, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("failed to push %s to %s: %w", t.Name, ref, err)
	}
	return digest, nil
}

// writeDigests writes DigestsFile (every image) and ValuesFile (the chart's
// images) into Out.
func (p *Push) writeDigests(pushed []Pushed) error {
	var digests, values strings.Builder
	fmt.Fprintf(&values, "# Written by `make push REGISTRY=%s TAG=%s`: the chart's images by digest.\n", p.Registry, p.Tag)
	fmt.Fprintf(&values, "# helm install fastpath charts/fastpath -f %s ... (docs/install.md)\n", ValuesFile)
	fmt.Fprintf(&values, "image:\n  registry: %s\n  tag: %q\n", p.Registry, p.Tag)
	for _, r := range pushed {
		fmt.Fprintf(&digests, "%s@%s\n", r.Ref, r.Digest)
		key := ChartKey(r.Target)
		if key == "" {
			continue
		}
		repo, err := Repository(r.Target)
		if err != nil {
			return err
		}
		fmt.Fprintf(&values, "  %s:\n    repository: %s\n    digest: %s\n", key, repo, r.Digest)
	}
	for file, text := range map[string]string{DigestsFile: digests.String(), ValuesFile: values.String()} {
		if err := os.WriteFile(filepath.Join(p.Out, file), []byte(text), 0o644); err != nil {
			return fmt.Errorf("failed to write %s: %w", file, err)
		}
	}
	return nil
}

// PrintPushed writes a table of the pushed images and their digests.
func PrintPushed(w io.Writer, pushed []Pushed) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tREF\tDIGEST")
	for _, r := range pushed {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Target.Name, r.Ref, r.Digest)
	}
	tw.Flush()
}
