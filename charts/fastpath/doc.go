// Package fastpath is the Helm chart of Fastpath (Chart.yaml, values.yaml,
// templates/, crds/ copied from config/crd/bases by `make manifests`); its Go test
// lints and renders the chart with the helm binary in bin/.
package fastpath
