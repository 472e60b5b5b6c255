// Package samples holds no code: its test applies every manifest in this
// directory to the embedded control plane (each must be accepted) and every
// manifest in invalid/ (each must be rejected with an error naming the field
// given by its "# expect:" line). cluster/ is the Pod-mode benchmark of the
// real local cluster (make cluster): a FastPathNetwork, an attachment that
// selects no VM (KubeVirt is not installed there) and a Pod-mode
// FastPathBenchmark; the test applies it too.
package samples
