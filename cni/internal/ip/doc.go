// Package ip is the part of containernetworking/plugins v1.9.1's pkg/ip
// (cidr.go, ip.go, addr_linux.go, route_linux.go, utils_linux.go) and
// pkg/ipam (ipam_linux.go: ConfigureIface) that the fastpath plugin and its
// in-process host-local allocator use, copied unchanged but for the package
// clause and the qualifiers of pkg/ip's own functions in ConfigureIface.
//
// Why a copy: pkg/ip also holds the IP masquerade helpers, which link
// sigs.k8s.io/knftables and github.com/coreos/go-iptables; both compile
// regular expressions at package init, on every start of the plugin, which
// is exec'd for every CNI call and never masquerades (docs/benchmarks.md §4
// has the cost). Anything importing pkg/ip or pkg/ipam brings them in, so
// the plugin binary must import neither (cni/cmd/fastpath's test checks).
// The files keep their upstream copyright headers; update them together
// with the module's version in go.mod.
package ip
