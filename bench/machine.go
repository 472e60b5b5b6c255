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
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/bench/netperf"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
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

// LocalInterface returns the interface this machine would use to reach
// host (found by connecting a UDP socket, which sends nothing, and matching
// its source address to an interface).
func LocalInterface(host string) (net.Interface, error) {
	c, err := net.Dial("udp", net.JoinHostPort(host, strconv.Itoa(netperf.DefaultControlPort)))
	if err != nil {
		return net.Interface{}, fmt.Errorf("failed to find a route to %s: %w", host, err)
	}
	src := c.LocalAddr().(*net.UDPAddr).IP
	c.Close()
	ifaces, err := net.Interfaces()
	if err != nil {
		return net.Interface{}, fmt.Errorf("failed to list interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(src) {
				return ifc, nil
			}
		}
	}
	return net.Interface{}, fmt.Errorf("failed to find the interface with address %s (route to %s)", src, host)
}

// LocalOffloads returns what interface ifName of this machine negotiated:
// each offload name of wellknown.Offloads to "on" or "off", as
// internal/datapath/offload.Read judges a feature group (on when every
// changeable feature of it is active and at least one is). It reads with
// ETHTOOL_GFEATURES, which needs no capability, so a runner pod that drops
// them all can read its own interface.
func LocalOffloads(ifName string) (map[string]string, error) {
	on, err := offload.Read(ifName)
	if err != nil {
		return nil, fmt.Errorf("failed to read the offloads of %s: %w", ifName, err)
	}
	out := make(map[string]string, len(wellknown.Offloads))
	for _, row := range wellknown.Offloads {
		out[row.Name] = "off"
		if on[row.Name] {
			out[row.Name] = "on"
		}
	}
	return out, nil
}
