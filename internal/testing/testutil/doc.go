// Package testutil holds helpers shared by the project's tests: the root
// requirement of datapath tests, unique names for the network namespaces,
// links and bridges a test creates, and cleanup helpers.
package testutil
