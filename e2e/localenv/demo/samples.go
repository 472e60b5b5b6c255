package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/fastpath-io/fastpath/e2e/localenv/emulation"
)

// The samples, applied as config/samples/README.md tells a user.

// applySamples does what docs/demo.md tells a user: create the namespace and
// the SSH key Secrets the samples reference, then apply config/samples/.
func (d *demo) applySamples(ctx context.Context) error {
	d.header("Apply config/samples/ with kubectl, as a user would")
	if _, err := d.kubectl(ctx, nil, "create", "namespace", Namespace); err != nil {
		return err
	}
	keyDir := filepath.Join(d.outDir, "ssh")
	key := filepath.Join(keyDir, "id_ed25519")
	if err := os.RemoveAll(keyDir); err != nil {
		return fmt.Errorf("failed to remove %s: %w", keyDir, err)
	}
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		return fmt.Errorf("failed to create %s: %w", keyDir, err)
	}
	fmt.Fprintf(d.out, "$ ssh-keygen -t ed25519 -N '' -C fastpath-bench -f %s\n", d.rel(key))
	if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fastpath-bench", "-f", key).CombinedOutput(); err != nil {
		return fmt.Errorf("failed to generate the benchmark SSH key: %w: %s", err, out)
	}
	if _, err := d.kubectl(ctx, nil, "-n", Namespace, "create", "secret", "generic", SSHSecret, "--from-file=ssh-privatekey="+d.rel(key)); err != nil {
		return err
	}
	if _, err := d.kubectl(ctx, nil, "-n", Namespace, "create", "secret", "generic", SSHPubSecret, "--from-file=key="+d.rel(key)+".pub"); err != nil {
		return err
	}
	files, err := sampleFiles(d.o.RepoRoot)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "(config/samples/vsock/'s db-link, the attachment with a vsock service, in place of the plain one, as config/samples/README.md says: this node meets its prerequisites, with the vsock relay on the EMULATED transport)\n")
	if d.o.Guests == emulation.GuestsQEMU {
		return d.applySamplesForRealGuests(ctx, files)
	}
	args := []string{"-n", Namespace, "apply"}
	for _, f := range files {
		args = append(args, "-f", d.rel(f))
	}
	_, err = d.kubectl(ctx, nil, args...)
	return err
}

// sampleFiles returns what a user applies for the samples with vsock from
// the start (config/samples/README.md): config/samples/vsock/*.yaml first,
// then every config/samples/*.yaml but the plain attachment, which the vsock
// one replaces (the attachment before the VMs, as in config/samples/'s own
// order, so that the VMs are wired when they are made).
func sampleFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "vsock", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("failed to find the vsock sample in %s", filepath.Join(root, "config", "samples", "vsock"))
	}
	rest, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	if err != nil {
		return nil, err
	}
	slices.Sort(rest)
	for _, f := range rest {
		if !slices.ContainsFunc(files, func(v string) bool { return filepath.Base(v) == filepath.Base(f) }) {
			files = append(files, f)
		}
	}
	return files, nil
}
