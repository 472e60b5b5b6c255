package images

import (
	"context"
	"fmt"
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
	return nil
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
