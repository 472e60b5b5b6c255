// Package crd embeds the generated CustomResourceDefinitions of
// fastpath.io/v1alpha1 (config/crd/bases, written by `make manifests`) so the
// test environment, the demo and the e2e suite install exactly the CRDs the
// Helm chart ships.
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var bases embed.FS

// Bases returns the fastpath.io CRDs decoded from config/crd/bases, one per
// file, sorted by file name. It fails only if a generated file is not a valid
// CRD, which `make verify` prevents.
func Bases() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return Decode(bases, "bases")
}

// Decode reads every *.yaml file in dir of fsys as one CustomResourceDefinition.
func Decode(fsys fs.FS, dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("failed to list CRDs in %s: %w", dir, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("failed to read CRD %s: %w", e.Name(), err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("failed to decode CRD %s: %w", e.Name(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}
