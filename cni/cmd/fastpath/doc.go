// Command fastpath is the fastpath CNI plugin, executed by Multus (or any CNI
// runtime) with the CNI_* environment and the netconf on stdin; it prints the
// CNI result (or error) on stdout and logs on stderr. The logic is in package
// github.com/fastpath-io/fastpath/cni/pkg/plugin; see cni/README.md.
//
// It carries the Linux bridge and Macvtap datapaths: an invocation that
// needs the Open vSwitch datapath is handed over (execve) to
// fastpath-ovs-plugin in the same directory, which carries every datapath. Package
// github.com/fastpath-io/fastpath/cni/pkg/datapath says why.
//
// The tests of this package execute the built binaries the way Multus does,
// and BenchmarkCNILatency measures their ADD and DEL latency.
package main
