package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/e2e/localenv/images"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// newImagesCmd is `images build|import|push`: Fastpath's container images built
// without a Docker daemon (`make images`; e2e/localenv/images), imported
// into a containerd (`make images-import CONTAINERD_ADDRESS=<socket>`) and
// pushed to a registry (`make push REGISTRY=<host/path> [TAG=]`).
//
//	fastpath-dev images build [--out _out/images] [IMAGE...]
//	fastpath-dev images import --address /run/containerd/containerd.sock [--out _out/images] [IMAGE...]
//	fastpath-dev images push --registry ghcr.io/fastpath-io --tag 0.1.0 [--insecure] [--out _out/images] [IMAGE...]
//
// IMAGE is pause, operator, agent, bench or domain-hook (all when none); an
// unknown one is a rejected command line (2).
func newImagesCmd(a *app) *cobra.Command {
	var out, address, registry, tag string
	var insecure bool
	names := func(_ *cobra.Command, args []string) error {
		root, err := testenv.RepoRoot()
		if err != nil {
			return err
		}
		_, err = images.Select(root, args...)
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
		return &images.Builder{Root: root, Out: o, Log: a.stderr}, nil
	}
	root := group(&cobra.Command{
		Use:   "images",
		Short: "Build Fastpath's OCI images without a Docker daemon and import them into containerd (run in the repository; --out is relative to the working directory)",
	})
	root.PersistentFlags().StringVar(&out, "out", "_out/images", "directory of the archives <out>/<image>.tar (and <out>/cache)")
	build := &cobra.Command{
		Use:   "build [IMAGE...]",
		Short: "Build the images (pause, operator, agent, bench, domain-hook when none; KubeVirt's virt-operator, virt-api, virt-controller, virt-handler, virt-launcher only when named) into <out>/<image>.tar",
		Args:  names,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.started = true
			b, err := builder()
			if err != nil {
				return err
			}
			results, err := b.Build(cmd.Context(), args...)
			images.PrintResults(a.stdout, results)
			return err
		},
	}
	imp := &cobra.Command{
		Use:   "import --address SOCKET [IMAGE...]",
		Short: "Import the built archives into the containerd at SOCKET (namespace k8s.io, platform linux/amd64) with ctr",
		Args:  names,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.started = true
			b, err := builder()
			if err != nil {
				return err
			}
			return images.Import(cmd.Context(), address, b.Out, a.stdout, args...)
		},
	}
	imp.Flags().StringVar(&address, "address", "", "containerd's socket, e.g. /run/fastpath/cluster-<hash>/containerd.sock for make cluster (required)")
	_ = imp.MarkFlagRequired("address")
	push := &cobra.Command{
		Use:   "push --registry HOST[/PATH] --tag TAG [IMAGE...]",
		Short: "Push the built archives to <registry>/<repository>:<tag> (credentials from ~/.docker/config.json), print each digest and write <out>/" + images.DigestsFile + " and <out>/" + images.ValuesFile + " (the chart's images by digest)",
		Args:  names,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.started = true
			root, err := testenv.RepoRoot()
			if err != nil {
				return err
			}
			targets, err := images.Select(root, args...)
			if err != nil {
				return err
			}
			b, err := builder()
			if err != nil {
				return err
			}
			p := &images.Push{Out: b.Out, Registry: registry, Tag: tag, Insecure: insecure, Log: a.stderr}
			pushed, err := p.Push(cmd.Context(), targets)
			images.PrintPushed(a.stdout, pushed)
			if err == nil {
				fmt.Fprintf(a.stdout, "digests: %s\nchart values: %s\n", filepath.Join(b.Out, images.DigestsFile), filepath.Join(b.Out, images.ValuesFile))
			}
			return err
		},
	}
	push.Flags().StringVar(&registry, "registry", "", "the repositories' prefix, host[:port][/path] (required)")
	push.Flags().StringVar(&tag, "tag", "", "the tag of every image (required)")
	push.Flags().BoolVar(&insecure, "insecure", false, "plain HTTP (already so for localhost and loopback addresses)")
	_ = push.MarkFlagRequired("registry")
	_ = push.MarkFlagRequired("tag")
	root.AddCommand(build, imp, push)
	return root
}
