package main

import (
	"runtime"

	"github.com/fastpath-io/fastpath/cni/pkg/ovs"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
)

func init() {
	// Network namespace switches (ns.Do) act on the OS thread; keep the main
	// goroutine on the thread it started on.
	runtime.LockOSThread()
}

func main() {
	plugin.Main(plugin.Options{OVS: ovs.Open})
}
