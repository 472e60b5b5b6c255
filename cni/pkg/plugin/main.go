package plugin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/netconf"
)

// Main is the body of a plugin binary's main: it checks stdin with
// netconf.Preflight before the CNI library (skel) sees it, so that an
// oversize configuration is refused without being read whole and a missing
// cniVersion gets the plugin's own message instead of skel's "incompatible
// CNI versions" for "0.1.0"; a plugin without opts.OVS hands a netconf of
// datapath OVS over to opts.OVSPlugin (see handOver); then it runs
// skel.PluginMainFuncs with Funcs(opts). VERSION and a call without
// CNI_COMMAND go to skel directly. A refused configuration is printed as a
// CNI error on stdout with exit status 1.
func Main(opts Options) {
	p := New(opts)
	if cmd := os.Getenv("CNI_COMMAND"); cmd != "" && cmd != "VERSION" {
		data, err := netconf.ReadStdin(os.Stdin)
		if err == nil {
			err = netconf.Preflight(data)
		}
		if err == nil && p.ovs == nil && netconf.PeekDatapath(data) == netconf.DatapathOVS {
			err = p.handOver(data, "datapath OVS")
		}
		if err == nil {
			err = replaceStdin(data)
		}
		if err != nil {
			var cniErr *types.Error
			if !errors.As(err, &cniErr) {
				cniErr = types.NewError(types.ErrIOFailure, err.Error(), "")
			}
			_ = cniErr.Print()
			os.Exit(1)
		}
	}
	skel.PluginMainFuncs(p.Funcs(), VersionInfo, About)
}

// replaceStdin makes os.Stdin an anonymous in-memory file (memfd) holding
// data, for skel to read again.
func replaceStdin(data []byte) error {
	f, err := memFile(data)
	if err != nil {
		return err
	}
	os.Stdin = f
	return nil
}

// memFile returns an anonymous in-memory file (memfd, close-on-exec)
// holding data, positioned at its start.
func memFile(data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("fastpath-stdin", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("failed to create in-memory file for stdin: %w", err)
	}
	f := os.NewFile(uintptr(fd), "stdin")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("failed to buffer stdin: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("failed to rewind buffered stdin: %w", err)
	}
	return f, nil
}

// handOver replaces this process (execve) with p.ovsPlugin, which runs the
// same invocation, with stdin (the netconf) on its standard input and this
// process's environment, and has the OVS datapath: what needs the OVS
// datapath says why. It returns only when it cannot exec, with a CNI error
// naming the binary. The locks this process holds are released by the exec
// (their files are close-on-exec) and taken again by the OVS plugin, so it
// must run before this invocation changed anything.
func (p *Plugin) handOver(stdin []byte, what string) error {
	if p.ovsPlugin == "" {
		return p.errNoOVS()
	}
	f, err := memFile(stdin)
	if err != nil {
		return err
	}
	if err := unix.Dup3(int(f.Fd()), 0, 0); err != nil {
		f.Close()
		return fmt.Errorf("failed to pass stdin to %s: %w", p.ovsPlugin, err)
	}
	err = syscall.Exec(p.ovsPlugin, []string{p.ovsPlugin}, os.Environ())
	f.Close()
	return types.NewError(types.ErrInternal, fmt.Sprintf(
		"failed to hand the invocation (%s) over to the OVS plugin %s: %v: fastpath needs it beside itself for the OVS datapath (the node agent fastpath-agent installs both)",
		what, p.ovsPlugin, err), "")
}

// errNoOVS is the error of a plugin that has neither the OVS datapath nor
// a binary to hand OVS invocations over to.
func (p *Plugin) errNoOVS() error {
	return types.NewError(types.ErrInternal, "datapath OVS is not built into this plugin binary and no OVS plugin is set to hand it over to", "")
}
