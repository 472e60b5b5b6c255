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
}

func main() {
	opts := plugin.Options{}
	if exe, err := os.Executable(); err == nil {
		opts.OVSPlugin = filepath.Join(filepath.Dir(exe), netconf.OVSPluginBinary)
	}
	plugin.Main(opts)
}
