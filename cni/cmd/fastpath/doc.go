// Command fastpath is the fastpath CNI plugin, executed by Multus (or any CNI
// runtime) with the CNI_* environment and the netconf on stdin; it prints the
// CNI result (or error) on stdout and logs on stderr. The logic is in package
// github.com/fastpath-io/fastpath/cni/pkg/plugin; see cni/README.md.
//
// The tests of this package execute the built binary the way Multus does,
// and BenchmarkCNILatency measures its ADD and DEL latency.
package main
