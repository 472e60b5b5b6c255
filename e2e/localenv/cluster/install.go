package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/e2e/localenv/images"
	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
	"github.com/fastpath-io/fastpath/internal/node/cniinstall"
)

// Namespace and Release are where and as what Install installs Fastpath.
const (
	Namespace = "fastpath-system"
	Release   = "fastpath"
)

// InstallOptions choose how Install installs Fastpath.
type InstallOptions struct {
	// Kustomize installs with `kubectl apply -k` of an overlay of
	// config/default (local images, the cluster's CNI directories) instead of
	// `helm install`.
	Kustomize bool
	// RepoRoot is the repository (charts/fastpath, config/default). Default:
	// the working directory.
	RepoRoot string
	// Timeout bounds the wait for Running pods and a Ready FastPathNode.
	// Default 5 minutes.
	Timeout time.Duration
}

// HelmValues are the chart values for this cluster besides its images
// (kubevirt: it runs KubeVirt, so its kubelet root is KubeVirtKubeletRoot):
// the cluster's CNI directories (the plugin's state directory too), its pod
// network, no KubeVirt node selector (without KubeVirt no node carries
// kubevirt.io/schedulable), and vsock mode Sibling's backend, with its
// sockets under the cluster's run directory, and the kubelet's PodResources
// socket under its root (the device plugins ask it which pod holds a
// device): the only vsock mode whose VMs start on a kernel
// without vhost_vsock. The images come from the cluster's registry by
// digest (Publish's values file).
func HelmValues(dir string, kubevirt bool) []string {
	bin, conf := CNIDirs(dir)
	l := Options{Dir: dir, KubeVirt: kubevirt}.layout()
	return []string{
		"agent.cniBinDir=" + bin, "agent.cniConfDir=" + conf, "agent.cniStateDir=" + CNIStateDir(dir),
		"operator.podNetworkCIDRs=" + DefaultPodCIDR.String(),
		"agent.nodeSelector=null",
		"agent.sibling.enabled=true",
		"agent.sibling.socketDir=" + filepath.Join(l.run, "sibling"),
		"agent.devicePlugin.podResourcesDir=" + filepath.Join(l.kubeletRoot, "pod-resources"),
	}
}

// Published is where Publish put Fastpath: the chart's OCI reference
// (oci://<registry>/charts/fastpath) and version, and the values file that
// names each image by digest in the registry.
type Published struct {
	Chart, Version, Values string
}

// ChartImages are the make images archives the chart runs (the operator,
// the agent, the benchmark runner, the domain hook sidecar, the vsock
// backend: the relay's by default, and vsock mode Sibling's).
var ChartImages = []string{"operator", "agent", "bench", "domain-hook", "vsock-backend"}

// Publish does what a release does, to the cluster's registry at host
// (plain HTTP): pushes ChartImages from imagesDir to <host>/fastpath/<repository>:local
// (writing imagesDir's values-digests.yaml) and the chart, packaged, to
// oci://<host>/charts, with bin/helm. Errors: an archive missing (make
// images), the registry refusing a push, helm failing.
func Publish(ctx context.Context, binDir, repoRoot, imagesDir, host string, log io.Writer) (Published, error) {
	targets, err := images.Select(repoRoot, ChartImages...)
	if err != nil {
		return Published{}, err
	}
	p := &images.Push{Out: imagesDir, Registry: host + "/fastpath", Tag: "local", Insecure: true, Log: log}
	if _, err := p.Push(ctx, targets); err != nil {
		return Published{}, err
	}
	tmp, err := os.MkdirTemp("", "fastpath-chart-")
	if err != nil {
		return Published{}, err
	}
	defer os.RemoveAll(tmp)
	helm := filepath.Join(binDir, "helm")
	out, err := exec.CommandContext(ctx, helm, "package", filepath.Join(repoRoot, "charts", "fastpath"), "--destination", tmp).CombinedOutput()
	if err != nil {
		return Published{}, fmt.Errorf("helm package: %w: %s", err, strings.TrimSpace(string(out)))
	}
	pkgs, err := filepath.Glob(filepath.Join(tmp, "fastpath-*.tgz"))
	if err != nil || len(pkgs) != 1 {
		return Published{}, fmt.Errorf("helm package wrote %v into %s, want one fastpath-<version>.tgz: %s", pkgs, tmp, strings.TrimSpace(string(out)))
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pkgs[0]), "fastpath-"), ".tgz")
	out, err = exec.CommandContext(ctx, helm, "push", pkgs[0], "oci://"+host+"/charts", "--plain-http").CombinedOutput()
	fmt.Fprintf(log, "%s", out)
	if err != nil {
		return Published{}, fmt.Errorf("helm push: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return Published{Chart: "oci://" + host + "/charts/fastpath", Version: version, Values: filepath.Join(imagesDir, images.ValuesFile)}, nil
}

// HelmInstallCommand returns the helm command line Install runs (helm from
// binDir): the README's `helm install` from an OCI registry, with the
// published chart, its images by digest and this cluster's HelmValues.
func HelmInstallCommand(binDir string, pub Published, dir string, kubevirt bool) []string {
	argv := []string{filepath.Join(binDir, "helm"), "install", Release, pub.Chart, "--version", pub.Version, "--plain-http",
		"-n", Namespace, "--create-namespace", "-f", pub.Values}
	for _, v := range HelmValues(dir, kubevirt) {
		argv = append(argv, "--set", v)
	}
	return append(argv, "--kubeconfig", Kubeconfig(dir))
}

// Install installs Fastpath on the running cluster in opts.Dir, printing the
// command it runs, then waits until the operator Deployment, the agent
// DaemonSet and the vsock backend DaemonSet (the relay's, by default) have
// their pods Running and ready, the agent has installed the
// fastpath CNI binary into the cluster's CNI bin directory, and the node's
// FastPathNode is Ready. Each step's duration goes to opts.Out.
func Install(ctx context.Context, opts Options, io InstallOptions) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if io.RepoRoot == "" {
		if io.RepoRoot, err = os.Getwd(); err != nil {
			return err
		}
	}
	if io.Timeout == 0 {
		io.Timeout = 5 * time.Minute
	}
	st, err := runstate.Load[runState](o.layout().state)
	if err != nil {
		return err
	}
	if st.KubeVirt || len(st.Nodes) > 0 {
		o.KubeVirt = true // the kubelet's root is KubeVirtKubeletRoot (a node's own on many)
	}
	// Where each node's files are seen from here, by node name.
	roots := map[string]string{o.NodeName: ""}
	if len(st.Nodes) > 0 {
		roots = map[string]string{}
		for _, n := range st.Nodes {
			roots[n.Name] = nodeRoot(n)
		}
	}
	c, err := adminClient(o.layout().adminKubeconfig)
	if err != nil {
		return err
	}
	u := &upper{o: o, l: o.layout(), c: c}
	total := time.Now()
	var argv []string
	if io.Kustomize {
		overlay, err := o.writeKustomizeOverlay(io.RepoRoot)
		if err != nil {
			return err
		}
		argv = []string{filepath.Join(o.BinDir, "kubectl"), "--kubeconfig", Kubeconfig(o.Dir), "apply", "--server-side", "-k", overlay}
	} else {
		if st.Registry == "" {
			return fmt.Errorf("the cluster in %s runs no registry (brought up by an older make cluster): make cluster-down, then make cluster", o.Dir)
		}
		var pub Published
		if err := u.step("push the images and the chart to the cluster's registry "+st.Registry, func() error {
			var log bytes.Buffer
			var err error
			pub, err = Publish(ctx, o.BinDir, io.RepoRoot, o.ImagesDir, st.Registry, &log)
			_ = os.WriteFile(filepath.Join(o.layout().logs, "publish.log"), log.Bytes(), 0o644)
			return err
		}); err != nil {
			return err
		}
		argv = HelmInstallCommand(o.BinDir, pub, o.Dir, o.KubeVirt)
	}
	fmt.Fprintf(o.Out, "cluster: %s\n", strings.Join(argv, " "))
	if err := u.step("install Fastpath ("+filepath.Base(argv[0])+")", func() error {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		out, err := cmd.CombinedOutput()
		_ = os.WriteFile(filepath.Join(o.layout().logs, "install.log"), out, 0o644)
		if err != nil {
			return fmt.Errorf("%s: %w: %s", filepath.Base(argv[0]), err, strings.TrimSpace(string(out)))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := u.step("operator Deployment, agent and vsock backend DaemonSet pods Running", func() error {
		return u.waitFor(ctx, "the operator, agent and vsock backend pods", io.Timeout, workloadsReady(c))
	}); err != nil {
		return err
	}
	bin, _ := CNIDirs(o.Dir)
	for _, name := range slices.Sorted(maps.Keys(roots)) {
		on := ""
		if len(st.Nodes) > 0 {
			on = " on " + name
		}
		if err := u.step("agent installed "+filepath.Join(bin, cniinstall.DefaultName)+on, func() error {
			return u.waitFor(ctx, "the fastpath CNI binary"+on, io.Timeout, func(context.Context) (bool, error) {
				st, err := os.Stat(roots[name] + filepath.Join(bin, cniinstall.DefaultName))
				return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0, err
			})
		}); err != nil {
			return err
		}
		if err := u.step("FastPathNode "+name+" Ready", func() error {
			return u.waitFor(ctx, "FastPathNode "+name+" Ready", io.Timeout, fastPathNodeReady(c, name))
		}); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "cluster: Fastpath installed in %.1fs (namespace %s)\n", time.Since(total).Seconds(), Namespace)
	return nil
}

// workloadsReady wants the operator Deployment available and the agent
// DaemonSet, and the vsock backend DaemonSet where the install has one (the
// relay's, agent.relay.backend.enabled, and Sibling's), with every desired
// pod ready on as many nodes as the agent; an error reports pods that are
// not.
func workloadsReady(c client.Client) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		dep := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: "fastpath-operator"}, dep); err != nil {
			return false, err
		}
		ds := &appsv1.DaemonSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: "fastpath-agent"}, ds); err != nil {
			return false, err
		}
		ready := dep.Status.ReadyReplicas >= 1 && ds.Status.DesiredNumberScheduled >= 1 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled
		backend := &appsv1.DaemonSet{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: "fastpath-vsock-backend"}, backend); {
		case apierrors.IsNotFound(err): // agent.relay.backend.enabled=false without Sibling
		case err != nil:
			return false, err
		default:
			ready = ready && backend.Status.DesiredNumberScheduled == ds.Status.DesiredNumberScheduled &&
				backend.Status.NumberReady == backend.Status.DesiredNumberScheduled
		}
		if ready {
			return true, nil
		}
		return false, podProblems(ctx, c, Namespace)
	}
}

// podProblems summarises the pods of ns that are not Running and ready.
func podProblems(ctx context.Context, c client.Client, ns string) error {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return err
	}
	var p []string
	for _, pod := range pods.Items {
		msg := string(pod.Status.Phase)
		for _, cs := range pod.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				msg += fmt.Sprintf(" %s waiting %s: %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				msg += fmt.Sprintf(" %s terminated %s (exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			case !cs.Ready:
				msg += fmt.Sprintf(" %s not ready", cs.Name)
			}
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status != corev1.ConditionTrue {
				msg += " unschedulable: " + cond.Message
			}
		}
		p = append(p, pod.Name+": "+msg)
	}
	if len(p) == 0 {
		return fmt.Errorf("no pods in namespace %s yet", ns)
	}
	return fmt.Errorf("%s", strings.Join(p, "; "))
}

func fastPathNodeReady(c client.Client, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		n := &fastpathv1alpha1.FastPathNode{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return false, err
		}
		cond := apimeta.FindStatusCondition(n.Status.Conditions, fastpathv1alpha1.ReadyCondition)
		if cond == nil {
			return false, fmt.Errorf("FastPathNode %s has no Ready condition yet", name)
		}
		if cond.Status != "True" {
			return false, fmt.Errorf("FastPathNode %s is not Ready: %s: %s", name, cond.Reason, cond.Message)
		}
		return true, nil
	}
}

// Uninstall removes the Helm release Install made, as docs/operations.md
// tells a user (helm uninstall: the chart's pre-delete hook cleans every
// node first), and waits for its objects to go. cluster down then fails
// when a link with the agent's marks is left on a node (issue 38).
func Uninstall(ctx context.Context, opts Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	total := time.Now()
	argv := []string{filepath.Join(o.BinDir, "helm"), "--kubeconfig", Kubeconfig(o.Dir), "uninstall", Release, "-n", Namespace, "--wait", "--timeout", "5m"}
	fmt.Fprintf(o.Out, "cluster: %s\n", strings.Join(argv, " "))
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	_ = os.WriteFile(filepath.Join(o.layout().logs, "uninstall.log"), out, 0o644)
	if err != nil {
		return fmt.Errorf("helm uninstall: %w: %s", err, strings.TrimSpace(string(out)))
	}
	fmt.Fprintf(o.Out, "cluster: Fastpath uninstalled in %.1fs (the chart's cleanup hook ran on every node)\n", time.Since(total).Seconds())
	return nil
}
