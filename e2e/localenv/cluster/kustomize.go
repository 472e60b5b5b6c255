package cluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// DefaultImageRegistry is the registry of the images config/default names
// (the chart's default image.registry).
const DefaultImageRegistry = "ghcr.io/fastpath-io"

// writeKustomizeOverlay writes <Dir>/kustomize, an overlay of config/default
// for this cluster, and returns its directory: the images make images built
// (localhost/fastpath-*:local, pull policy Never, also for the runner and
// domain hook images the operator is given as flags, and for the vsock
// backend that runs the relay by default), the cluster's pod network, CNI
// directories and CNI state directory, the backend's socket directory under
// the cluster's run directory (as HelmValues puts it), and no KubeVirt node
// selector. The operator's and agent's flags are read from config/default and
// changed, not restated.
func (o Options) writeKustomizeOverlay(repoRoot string) (string, error) {
	base := filepath.Join(repoRoot, "config", "default")
	data, err := os.ReadFile(filepath.Join(base, "fastpath.yaml"))
	if err != nil {
		return "", fmt.Errorf("failed to read config/default (run make manifests): %w", err)
	}
	args, err := containerArgs(data, "Deployment", "fastpath-operator", "operator")
	if err != nil {
		return "", err
	}
	agentArgs, err := containerArgs(data, "DaemonSet", "fastpath-agent", "agent")
	if err != nil {
		return "", err
	}
	// The install-cni init container writes the node configuration the
	// agent verifies: both get the cluster's CNI state directory.
	installArgs, err := containerArgs(data, "DaemonSet", "fastpath-agent", "install-cni")
	if err != nil {
		return "", err
	}
	for _, list := range [][]string{agentArgs, installArgs} {
		for i, a := range list {
			if strings.HasPrefix(a, "--cni-state-dir=") {
				list[i] = "--cni-state-dir=" + CNIStateDir(o.Dir)
			}
		}
	}
	local := func(component string) string { return "localhost/fastpath-" + component + ":local" }
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--runner-image="):
			args[i] = "--runner-image=" + local("bench")
		case strings.HasPrefix(a, "--domain-hook-image="):
			args[i] = "--domain-hook-image=" + local("domain-hook")
		case strings.HasPrefix(a, "--pod-network-cidr="):
			args[i] = ""
		}
	}
	args = append(slicesCompact(args), "--pod-network-cidr="+o.PodCIDR.Masked().String())

	dir := filepath.Join(o.Dir, "kustomize")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("failed to create %s: %w", dir, err)
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		return "", err
	}
	bin, conf := CNIDirs(o.Dir)
	kustomization := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{rel},
		"images": []map[string]string{
			{"name": DefaultImageRegistry + "/fastpath-operator", "newName": "localhost/fastpath-operator", "newTag": "local"},
			{"name": DefaultImageRegistry + "/fastpath-agent", "newName": "localhost/fastpath-agent", "newTag": "local"},
			{"name": DefaultImageRegistry + "/fastpath-vsock-backend", "newName": "localhost/fastpath-vsock-backend", "newTag": "local"},
		},
		"patches": []map[string]string{{"path": "operator.yaml"}, {"path": "agent.yaml"}, {"path": "vsock-backend.yaml"}},
	}
	// config/default runs the relay in fastpath-vsock-backend (the chart's
	// agent.relay.backend.enabled): its socket directory, which both pods
	// mount at the same path inside, is on the host under the cluster's run
	// directory, not the host's /var/run.
	backendDir := filepath.Join(o.layout().run, "sibling", "backend")
	// The agent makes it (--relay-backend-gid); the backend waits for it
	// (type Directory), as in the chart.
	backendVolume := func(name, typ string) map[string]any {
		return map[string]any{"name": name, "hostPath": map[string]string{"path": backendDir, "type": typ}}
	}
	backend := map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]string{"name": "fastpath-vsock-backend", "namespace": Namespace},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"nodeSelector": nil, // on the agent's nodes
			"containers":   []map[string]any{{"name": "vsock-backend", "imagePullPolicy": "Never"}},
			"volumes":      []map[string]any{backendVolume("sockets", "Directory")},
		}}},
	}
	operator := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]string{"name": "fastpath-operator", "namespace": Namespace},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []map[string]any{{"name": "operator", "imagePullPolicy": "Never", "args": args}},
		}}},
	}
	leasesDir := filepath.Join(CNIStateDir(o.Dir), leases.Dir)
	ipamDir := netconf.IPAMDataDir(CNIStateDir(o.Dir))
	agent := map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]string{"name": "fastpath-agent", "namespace": Namespace},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"nodeSelector":   nil, // KubeVirt is not installed: no node is kubevirt.io/schedulable
			"initContainers": []map[string]any{{"name": "install-cni", "imagePullPolicy": "Never", "args": installArgs}},
			// The DHCP responder reads the leases at --cni-state-dir/leases
			// and host-local's allocations at --cni-state-dir/ipam.
			"containers": []map[string]any{{"name": "agent", "imagePullPolicy": "Never", "args": agentArgs,
				"volumeMounts": []map[string]any{{"name": "cni-leases", "mountPath": leasesDir, "readOnly": true},
					{"name": "cni-ipam", "mountPath": ipamDir, "readOnly": true}}}},
			"volumes": []map[string]any{
				{"name": "cni-bin", "hostPath": map[string]string{"path": bin, "type": "DirectoryOrCreate"}},
				{"name": "cni-node-config", "hostPath": map[string]string{"path": filepath.Join(conf, "fastpath.d"), "type": "DirectoryOrCreate"}},
				{"name": "cni-leases", "hostPath": map[string]string{"path": leasesDir, "type": "DirectoryOrCreate"}},
				{"name": "cni-ipam", "hostPath": map[string]string{"path": ipamDir, "type": "DirectoryOrCreate"}},
				// The kubelet's PodResources API, under this cluster's kubelet root.
				{"name": "pod-resources", "hostPath": map[string]string{"path": filepath.Join(o.layout().kubeletRoot, "pod-resources"), "type": "Directory"}},
				// The vsock backend's control socket, for the relay.
				backendVolume("vsock-backend", "DirectoryOrCreate"),
			},
		}}},
	}
	for name, obj := range map[string]any{"kustomization.yaml": kustomization, "operator.yaml": operator, "agent.yaml": agent, "vsock-backend.yaml": backend} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return "", fmt.Errorf("failed to encode %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", fmt.Errorf("failed to write %s: %w", filepath.Join(dir, name), err)
		}
	}
	return dir, nil
}

// containerArgs returns the args of container (or init container) in the
// workload kind/name of a multi-document manifest.
func containerArgs(manifest []byte, kind, name, container string) ([]string, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var w struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := dec.Decode(&w); err != nil {
			if err == io.EOF {
				break
			}
			return nil, fmt.Errorf("failed to decode config/default/fastpath.yaml: %w", err)
		}
		if w.Kind != kind || w.Metadata.Name != name {
			continue
		}
		for _, c := range append(w.Spec.Template.Spec.InitContainers, w.Spec.Template.Spec.Containers...) {
			if c.Name == container {
				return append([]string(nil), c.Args...), nil
			}
		}
	}
	return nil, fmt.Errorf("config/default/fastpath.yaml has no %s %s with a container %s", kind, name, container)
}

// slicesCompact drops empty strings.
func slicesCompact(in []string) []string {
	out := in[:0]
	for _, s := range in {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
