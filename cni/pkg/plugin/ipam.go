package plugin

import (
	"context"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/fastpath-io/fastpath/cni/pkg/hostlocal"
)

// The IPAM calls of an invocation for the attachment of args (container ID,
// interface name, CNI_ARGS: what the IPAM plugin would read from the
// environment). IPAM type host-local runs in this process (package
// hostlocal: the same allocator, files and lock as the binary, without a
// second process's start-up on every ADD and DEL); any other type is
// executed from CNI_PATH through ipamEx. GC and STATUS are always the
// binary's.

// ipamAdd runs the ADD of IPAM plugin ipamType with stdin.
func ipamAdd(ctx context.Context, ipamType string, stdin []byte, args hostlocal.Args, ipamEx *ipamExec) (types.Result, error) {
	if ipamType == hostlocal.Type {
		return hostlocal.Add(args, stdin)
	}
	return ipamEx.delegateAdd(ctx, ipamType, stdin)
}

// ipamDel runs the DEL of IPAM plugin ipamType with stdin; the executed
// plugin gets this invocation's environment (args as CNI_CONTAINERID, ...).
func ipamDel(ctx context.Context, ipamType string, stdin []byte, args hostlocal.Args, ipamEx *ipamExec) error {
	if ipamType == hostlocal.Type {
		return hostlocal.Del(args, stdin)
	}
	return ipamEx.delegate(ctx, "DEL", ipamType, stdin)
}

// ipamCheck runs the CHECK of IPAM plugin ipamType with stdin.
func ipamCheck(ctx context.Context, ipamType string, stdin []byte, args hostlocal.Args, ipamEx *ipamExec) error {
	if ipamType == hostlocal.Type {
		return hostlocal.Check(args, stdin)
	}
	return ipamEx.delegate(ctx, "CHECK", ipamType, stdin)
}
