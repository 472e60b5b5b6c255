// Package docs holds no code. architecture_test.go checks the layers of
// architecture.md with go list, and that no shipped binary links the harness.
// links_test.go parses every Markdown
// file of the repository with goldmark and fails on a relative link whose
// target is not in the repository, or whose #anchor names no heading of the
// target file (GitHub's heading IDs), so that README.md and docs/ stand on
// their own in a clone. manifests_test.go creates every fastpath.io manifest
// of a ```yaml fence in README.md and docs/*.md with a server-side dry run
// against the CRDs of config/crd/bases (envtest: KUBEBUILDER_ASSETS, `make
// setup-core`), so that an example a reader copies is one the API server
// accepts. A document with neither apiVersion nor kind is a fragment and is
// skipped; a fence preceded by `<!-- not-validated: reason -->` is skipped
// too. troubleshooting_test.go parses api/v1alpha1/conditions.go (go/parser)
// and fails when troubleshooting.md lacks a row for a Reason* or *Condition
// constant's value, or has a row for one that no longer exists.
package docs
