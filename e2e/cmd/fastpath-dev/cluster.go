package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/e2e/localenv/cluster"
)

// newClusterCmd is `cluster up|down|install|uninstall`: a REAL single-node Kubernetes
// cluster on this machine (e2e/localenv/cluster): `up` (make cluster),
// `down` (make cluster-down) and `install` (make cluster-install: helm
// install of charts/fastpath with the local images, or kubectl apply -k
// config/default).
func newClusterCmd(a *app) *cobra.Command {
	var o cluster.Options
	var kustomize bool
	root := group(&cobra.Command{
		Use:   "cluster",
		Short: "A REAL single-node Kubernetes cluster here: kubelet, containerd, Multus, no KubeVirt (root; run in the repository root)",
	})
	root.PersistentFlags().StringVar(&o.Dir, "dir", "_out/cluster", "directory of everything the cluster writes")
	root.PersistentFlags().StringVar(&o.BinDir, "bin-dir", "bin", "directory of the Kubernetes binaries, crictl and multus (make setup)")
	root.PersistentFlags().StringVar(&o.ImagesDir, "images-dir", "_out/images", "directory of the image archives of make images")
	abs := func() error {
		for _, p := range []*string{&o.Dir, &o.BinDir, &o.ImagesDir} {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return err
			}
			*p = abs
		}
		o.Out = a.stdout
		a.started = true
		return nil
	}
	up := &cobra.Command{
		Use:   "up",
		Short: "Start the cluster and wait until its node is Ready (kubeconfig: <dir>/kubeconfig)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := abs(); err != nil {
				return err
			}
			c, err := cluster.Up(cmd.Context(), o)
			if err != nil {
				return err
			}
			for _, k := range []string{"kubelet", "containerd", "runc", "multus"} {
				fmt.Fprintf(a.stdout, "cluster: %-10s %s\n", k, c.Versions[k])
			}
			return nil
		},
	}
	up.Flags().BoolVar(&o.KubeVirt, "kubevirt", false, "lay the node out for KubeVirt: kubelet root "+cluster.KubeVirtKubeletRoot+", and it and "+cluster.KubeVirtRunDir+" as shared mounts (refused when either exists)")
	up.Flags().IntVar(&o.Nodes, "nodes", 1, fmt.Sprintf("number of nodes (1 to %d): 1 is this host; more run each node in its own network, mount, UTS and PID namespaces and cgroup root, on bridge %s", cluster.MaxNodes, cluster.NodesBridge))
	up.Flags().StringVar(&o.KubeVirtDir, "kubevirt-dir", "", "with --kubevirt, install KubeVirt from this directory of make setup-kubevirt (bin/kubevirt/<version>: its kubevirt-operator.yaml and kubevirt-cr.yaml) and wait until it is Available; its images must be in --images-dir (make kubevirt-images)")
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop the cluster and remove everything it made (containers, shims, mounts, cgroups, netns, links, processes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := abs(); err != nil {
				return err
			}
			if err := cluster.Down(cmd.Context(), o); err != nil {
				return err
			}
			left, err := cluster.Leftovers(o)
			if err != nil {
				return err
			}
			if len(left) > 0 {
				return fmt.Errorf("left behind: %v", left)
			}
			fmt.Fprintln(a.stdout, "cluster: nothing left behind (processes, shims, mounts, cgroups, netns, links, nftables, sockets)")
			return nil
		},
	}
	install := &cobra.Command{
		Use:   "install",
		Short: "Install Fastpath with the local images: helm install of charts/fastpath (or kubectl apply -k config/default with --kustomize)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := abs(); err != nil {
				return err
			}
			return cluster.Install(cmd.Context(), o, cluster.InstallOptions{Kustomize: kustomize})
		},
	}
	install.Flags().BoolVar(&kustomize, "kustomize", false, "install with kubectl apply -k config/default instead of helm")
	uninstall := &cobra.Command{
		Use:   "uninstall",
		Short: "helm uninstall Fastpath (the chart's hook cleans every node first); cluster down then fails on a link with the agent's marks left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := abs(); err != nil {
				return err
			}
			return cluster.Uninstall(cmd.Context(), o)
		},
	}
	var spec cluster.NodeInitSpec
	nodeInit := &cobra.Command{
		Use:    cluster.NodeInitArg,
		Short:  "PID 1 of a node of a multi-node cluster (cluster up starts it in the node's namespaces)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			a.started = true
			return cluster.NodeInit(spec)
		},
	}
	nodeInit.Flags().StringVar(&spec.Name, "name", "", "the node's name (its host name)")
	nodeInit.Flags().StringArrayVar(&spec.Binds, "bind", nil, "source:target to bind-mount in the node")
	root.AddCommand(up, down, install, uninstall, nodeInit)
	return root
}
