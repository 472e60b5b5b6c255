package main

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
)

func init() {
	// Network namespace switches (ns.Do) act on the OS thread; keep the main
	// goroutine on the thread it started on.
	runtime.LockOSThread()
	// One P: the plugin lives for milliseconds, mostly in system calls, and
	// its IPAM plugin is a process of its own; with a P per CPU the runtime
	// wakes and spins further threads to look for work each time a
	// goroutine is made ready, which adds CPU to every ADD when ADDs run
	// concurrently. GOMAXPROCS=1 in the environment does better still (the
	// runtime then never starts a second P), but the runtime that executes
	// the plugin sets its environment. The figures: docs/design.md §4.3.
	runtime.GOMAXPROCS(1)
}

func main() {
	opts := plugin.Options{}
	if exe, err := os.Executable(); err == nil {
		opts.OVSPlugin = filepath.Join(filepath.Dir(exe), netconf.OVSPluginBinary)
	}
	plugin.Main(opts)
}
