package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// Machine describes this machine for results.Document.Machine: hostname,
// kernel release (uname -r), logical CPUs, Go version, now (UTC, whole
// seconds) and emulated, the caller's note on what is emulated ("" if
// nothing). Fields it cannot read stay empty.
func Machine(emulated string) results.Machine {
	m := results.Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Timestamp: time.Now().UTC().Truncate(time.Second), Emulated: emulated}
	m.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return m
}

// Document runs r and wraps its runs with the machine description. When a
// test is run by the Netperf tool it records `netperf -V` from the first
// endpoint's executor (an error there is returned: netperf could not run
// there either).
func Document(ctx context.Context, r *Runner, emulated string) (results.Document, error) {
	doc := results.Document{Machine: Machine(emulated)}
	if err := r.Validate(); err != nil {
		return doc, err
	}
	for _, t := range r.Matrix.Tests {
		tool, _ := r.tool(t)
		if np, ok := tool.(Netperf); ok {
			v, err := netperf.Version(ctx, r.Paths[0].Endpoints[0].executor(), np.Binary)
			if err != nil {
				return doc, err
			}
			doc.Machine.Netperf = v
			break
		}
	}
	runs, err := r.Run(ctx)
	if err != nil {
		return doc, err
	}
	doc.Runs = runs
	return doc, nil
}

// LocalMTU returns the MTU of the interface this machine would use to reach
// host (found by connecting a UDP socket, which sends nothing, and matching
// its source address to an interface).
func LocalMTU(host string) (int, error) {
	c, err := net.Dial("udp", net.JoinHostPort(host, strconv.Itoa(netperf.DefaultControlPort)))
	if err != nil {
		return 0, fmt.Errorf("failed to find a route to %s: %w", host, err)
	}
	src := c.LocalAddr().(*net.UDPAddr).IP
	c.Close()
	ifaces, err := net.Interfaces()
	if err != nil {
		return 0, fmt.Errorf("failed to list interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(src) {
				return ifc.MTU, nil
			}
		}
	}
	return 0, fmt.Errorf("failed to find the interface with address %s (route to %s)", src, host)
}
