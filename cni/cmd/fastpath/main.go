package main

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
)

func init() {
	// The main goroutine is not locked to its thread (runtime.LockOSThread,
	// which CNI plugins traditionally call here): ns.Do runs its callback
	// in a goroutine of its own that locks its thread and switches the
	// namespace, and scraps the thread unless it switched back, so every
	// other thread stays in the host namespace. With main locked, each
	// time it waited (for ns.Do's goroutine, for the IPAM goroutine) the
	// runtime handed its only P to another thread and back: about 150
	// futex calls and 0.4 ms of CPU per ADD (docs/benchmarks.md §4).
	//
	// One P: the plugin lives for milliseconds, mostly in system calls, and
	// host-local runs in it; with a P per CPU the runtime
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
