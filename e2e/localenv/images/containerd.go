package images

import (
	"context"
	"fmt"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// CRINamespace is the containerd namespace the CRI plugin (and so the
// kubelet) uses.
const CRINamespace = "k8s.io"

// ImportCommand returns the ctr command that imports archive into the
// containerd at address (its socket path):
//
//	ctr --address <address> -n k8s.io images import --platform linux/amd64 <archive>
func ImportCommand(ctx context.Context, address, archive string) *exec.Cmd {
	return exec.CommandContext(ctx, "ctr", "--address", address, "-n", CRINamespace,
		"images", "import", "--platform", Platform.OS+"/"+Platform.Architecture, archive)
}

// Import imports the archives <dir>/<name>.tar named into the containerd at
// address with ImportCommand, writing ctr's output to out. With no names it
// imports every archive in dir but KubeVirt's and the guest's (KubeVirtTargets
// and GuestKernelBootTarget, imported only when named). A named archive that is missing (never built, or skipped like
// a domain-hook whose sidecar-shim could not be built) is reported on out and
// left out; an empty address or a failing ctr is an error.
func Import(ctx context.Context, address, dir string, out io.Writer, names ...string) error {
	if address == "" {
		return fmt.Errorf("failed to import images: address (containerd's socket) is empty")
	}
	if len(names) == 0 {
		archives, err := filepath.Glob(filepath.Join(dir, "*.tar"))
		if err != nil {
			return err
		}
		onlyNamed := map[string]bool{} // KubeVirt's images and the guest's
		for _, t := range append(KubeVirtTargets(), GuestKernelBootTarget) {
			onlyNamed[t.Name] = true
		}
		for _, a := range archives {
			if n := strings.TrimSuffix(filepath.Base(a), ".tar"); !onlyNamed[n] {
				names = append(names, n)
			}
		}
	}
	for _, name := range names {
		archive := filepath.Join(dir, name+".tar")
		if _, err := os.Stat(archive); err != nil {
			fmt.Fprintf(out, "images: no %s (not built: `make images`); not imported\n", archive)
			continue
		}
		cmd := ImportCommand(ctx, address, archive)
		cmd.Stdout, cmd.Stderr = out, out
		fmt.Fprintf(out, "images: %s\n", strings.Join(cmd.Args, " "))
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("failed to import %s into containerd %s: %w", archive, address, err)
		}
	}
	return tagDigests(ctx, address, out)
}

// tagDigests gives every imported image <repository>:<tag> the name
// <repository>@<digest> of its manifest too, as a pull from a registry
// records it: the CRI then reports that name as the containers' imageID
// (not the bare config digest), and what pins an image by it finds it on
// every node that imported the same archive. KubeVirt does: a migration's
// target pod asks for the source's kernel-boot and container-disk images
// by the digest the source pod ran.
func tagDigests(ctx context.Context, address string, out io.Writer) error {
	ls, err := exec.CommandContext(ctx, "ctr", "--address", address, "-n", CRINamespace, "images", "ls").Output()
	if err != nil {
		return fmt.Errorf("failed to list the images of containerd %s: %w", address, err)
	}
	for _, t := range digestNames(string(ls)) {
		cmd := exec.CommandContext(ctx, "ctr", "--address", address, "-n", CRINamespace, "images", "tag", t[0], t[1])
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("failed to name %s %s in containerd %s: %w", t[0], t[1], address, err)
		}
	}
	return nil
}

// digestNames reads `ctr images ls` (columns REF TYPE DIGEST ...) and
// returns, for each tagged image without its digest name yet, the pair
// [<repository>:<tag>, <repository>@<manifest digest>]. Names are parsed
// with distribution's reference package; what is not a tagged name (a
// digest name, a bare sha256 ID) is skipped.
func digestNames(ls string) [][2]string {
	type row struct{ ref, digest string }
	var rows []row
	have := map[string]bool{}
	for _, line := range strings.Split(ls, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[2], "sha256:") {
			continue
		}
		have[f[0]] = true
		rows = append(rows, row{f[0], f[2]})
	}
	var out [][2]string
	for _, r := range rows {
		if _, err := digest.Parse(r.ref); err == nil {
			continue // an image ID (sha256:<config digest>), which the CRI lists as a ref
		}
		named, err := reference.ParseNormalizedNamed(r.ref)
		if err != nil {
			continue
		}
		if _, tagged := named.(reference.Tagged); !tagged {
			continue
		}
		d, err := digest.Parse(r.digest)
		if err != nil {
			continue
		}
		canonical, err := reference.WithDigest(reference.TrimNamed(named), d)
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(r.ref, ":"+named.(reference.Tagged).Tag()) + "@" + canonical.Digest().String()
		if !have[name] {
			out = append(out, [2]string{r.ref, name})
		}
	}
	return out
}

// PrintResults writes a table of Build's results: image, ref, size, and
// whether it was built, kept (inputs unchanged) or skipped (with the reason).
func PrintResults(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tREF\tSIZE\tTIME\tSTATE")
	for _, r := range results {
		state, size := "built", human(r.Size)
		switch {
		case r.Skipped != "":
			state, size = "SKIPPED: "+r.Skipped, "-"
		case r.Cached:
			state = "unchanged"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs\t%s\n", r.Target.Name, r.Target.Ref, size, r.Took.Seconds(), state)
	}
	tw.Flush()
}
