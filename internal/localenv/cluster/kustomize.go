package cluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// DefaultImageRegistry is the registry of the images config/default names
// (the chart's default image.registry).
const DefaultImageRegistry = "ghcr.io/fastpath-io"

// writeKustomizeOverlay writes <Dir>/kustomize, an overlay of config/default
// for this cluster, and returns its directory: the images make images built
// (localhost/fastpath-*:local, pull policy Never, also for the runner and
// domain hook images the operator is given as flags), the cluster's pod
// network and CNI directories, and no KubeVirt node selector. The operator's
// flags are read from config/default and changed, not restated.
func (o Options) writeKustomizeOverlay(repoRoot string) (string, error) {
	base := filepath.Join(repoRoot, "config", "default")
	data, err := os.ReadFile(filepath.Join(base, "fastpath.yaml"))
	if err != nil {
		return "", fmt.Errorf("failed to read config/default (run make manifests): %w", err)
	}
	args, err := operatorArgs(data)
	if err != nil {
		return "", err
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
		},
		"patches": []map[string]string{{"path": "operator.yaml"}, {"path": "agent.yaml"}},
	}
	operator := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]string{"name": "fastpath-operator", "namespace": Namespace},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []map[string]any{{"name": "operator", "imagePullPolicy": "Never", "args": args}},
		}}},
	}
	agent := map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]string{"name": "fastpath-agent", "namespace": Namespace},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"nodeSelector": nil, // KubeVirt is not installed: no node is kubevirt.io/schedulable
			"containers":   []map[string]any{{"name": "agent", "imagePullPolicy": "Never"}},
			"volumes": []map[string]any{
				{"name": "cni-bin", "hostPath": map[string]string{"path": bin, "type": "DirectoryOrCreate"}},
				{"name": "cni-node-config", "hostPath": map[string]string{"path": filepath.Join(conf, "fastpath.d"), "type": "DirectoryOrCreate"}},
			},
		}}},
	}
	for name, obj := range map[string]any{"kustomization.yaml": kustomization, "operator.yaml": operator, "agent.yaml": agent} {
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

// operatorArgs returns the args of the operator container of the
// fastpath-operator Deployment in a multi-document manifest.
func operatorArgs(manifest []byte) ([]string, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			if err == io.EOF {
				break
			}
			return nil, fmt.Errorf("failed to decode config/default/fastpath.yaml: %w", err)
		}
		if d.Kind != "Deployment" || d.Name != "fastpath-operator" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "operator" {
				return append([]string(nil), c.Args...), nil
			}
		}
	}
	return nil, fmt.Errorf("config/default/fastpath.yaml has no Deployment fastpath-operator with a container operator")
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
