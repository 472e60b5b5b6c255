// Package fastpath is the Helm chart of Fastpath (Chart.yaml, values.yaml,
// templates/, files/crds copied from config/crd/bases by `make manifests` and
// rendered by templates/crds.yaml so that helm upgrade updates them); its Go test
// lints and renders the chart with the helm binary in bin/.
package fastpath
