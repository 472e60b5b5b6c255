package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/test/localenv/images"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the command line args and returns the exit status: 0 on success
// and for --help, 1 when a build or import failed, 2 for a command line it
// rejects (unknown flag or image name).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var out, address string
	started := false
	names := func(_ *cobra.Command, args []string) error {
		_, err := images.Select(args...)
		return err
	}
	builder := func() (*images.Builder, error) {
		// The repository's root (the product module's go.mod), found upwards
		// from here: the images' sources, the Dockerfile and hack/tools.
		root, err := testenv.RepoRoot()
		if err != nil {
			return nil, err
		}
		o, err := filepath.Abs(out)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(o, 0o755); err != nil {
			return nil, err
		}
		return &images.Builder{Root: root, Out: o, Log: stderr}, nil
	}
	root := &cobra.Command{
		Use:           "fastpath-images",
		Short:         "Build Fastpath's OCI images without a Docker daemon and import them into containerd (run in the repository; --out is relative to the working directory)",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentFlags().StringVar(&out, "out", "_out/images", "directory of the archives <out>/<image>.tar (and <out>/cache)")
	build := &cobra.Command{
		Use:   "build [IMAGE...]",
		Short: "Build the images (pause, operator, agent, bench, domain-hook when none; KubeVirt's virt-operator, virt-api, virt-controller, virt-handler, virt-launcher only when named) into <out>/<image>.tar",
		Args:  names,
		RunE: func(cmd *cobra.Command, args []string) error {
			started = true
			b, err := builder()
			if err != nil {
				return err
			}
			results, err := b.Build(cmd.Context(), args...)
			images.PrintResults(stdout, results)
			return err
		},
	}
	imp := &cobra.Command{
		Use:   "import --address SOCKET [IMAGE...]",
		Short: "Import the built archives into the containerd at SOCKET (namespace k8s.io, platform linux/amd64) with ctr",
		Args:  names,
		RunE: func(cmd *cobra.Command, args []string) error {
			started = true
			b, err := builder()
			if err != nil {
				return err
			}
			return images.Import(cmd.Context(), address, b.Out, stdout, args...)
		},
	}
	imp.Flags().StringVar(&address, "address", "", "containerd's socket, e.g. /run/fastpath/cluster-<hash>/containerd.sock for make cluster (required)")
	_ = imp.MarkFlagRequired("address")
	root.AddCommand(build, imp)
	root.SetArgs(args)
	root.SetOut(stderr)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "fastpath-images: %v\n", err)
		if started {
			return 1
		}
		return 2
	}
	return 0
}
