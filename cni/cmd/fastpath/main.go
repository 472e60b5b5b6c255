package main

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/fastpath-io/fastpath/cni/pkg/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
)

func init() {
	// Network namespace switches (ns.Do) act on the OS thread; keep the main
	// goroutine on the thread it started on.
	runtime.LockOSThread()
	// One P: the plugin lives for milliseconds, mostly in system calls, and
	// its IPAM plugin is a process of its own; with a P per CPU the runtime
	// wakes and spins further threads to look for work each time a
	// goroutine is made ready. Under 20 concurrent ADDs on the 2-core
	// development machine an ADD cost 10.2-10.7 ms of CPU with host-local
	// instead of 11.1-11.7 (issue 13). GOMAXPROCS=1 in the environment does
	// better still (9.4-9.7 ms: the runtime then never starts a second P),
	// but the runtime that executes the plugin sets its environment.
	runtime.GOMAXPROCS(1)
}

func main() {
	opts := plugin.Options{}
	if exe, err := os.Executable(); err == nil {
		opts.OVSPlugin = filepath.Join(filepath.Dir(exe), netconf.OVSPluginBinary)
	}
	plugin.Main(opts)
}
