// Package samples holds no code: its test applies every manifest in this
// directory to the embedded control plane (each must be accepted) and every
// manifest in invalid/ (each must be rejected with an error naming the field
// given by its "# expect:" line).
package samples
