// Package scheme builds the runtime.Scheme every Fastpath binary and test uses:
// the Kubernetes built-in types, apiextensions/v1, fastpath.io/v1alpha1,
// KubeVirt's kubevirt.io/v1 and Multus's k8s.cni.cncf.io/v1.
//
// Why a package of its own (under 100 lines): the operator, the node agent,
// kubectl-fastpath, the envtest environment, the emulation and the e2e suite
// all need the same scheme, and it must stay a leaf that imports only API
// type packages. It cannot live in api/v1alpha1 (users of the API types would
// then link KubeVirt's and Multus's), and any bigger package that all of
// those import would drag its own dependencies (controllers, the test
// environment) into the binaries.
package scheme
