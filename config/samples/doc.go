// Package samples holds no code (README.md says what the samples are and how
// to apply them): its test applies every manifest in this directory to the
// embedded control plane (each must be accepted), vsock/ (the attachment
// with a vsock service, which must be the plain one plus spec.vsock), and every
// manifest in invalid/ (each must be rejected with an error naming the field
// given by its "# expect:" line). cluster/ is the Pod-mode benchmark of the
// real local cluster (make cluster): a FastPathNetwork, an attachment that
// selects no VM (KubeVirt is not installed there) and a Pod-mode
// FastPathBenchmark; the test applies it too.
package samples
