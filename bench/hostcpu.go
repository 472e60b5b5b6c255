package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// hostCPUPath is the node agent's host CPU endpoint
// (internal/node/hostcpu.Path; the runner does not link the agent's side).
const hostCPUPath = "/hostcpu"

// hostCPUTimeout bounds one read of the agent.
const hostCPUTimeout = 10 * time.Second

// HostCPU says where the runner reads the host's CPU counters in VM mode
// (--host-cpu-agent, --launcher-pods).
type HostCPU struct {
	// Agent is the node agent's host CPU endpoint on the VMs' node,
	// "<node IP>:<port>".
	Agent netip.AddrPort
	// Launchers[i] are the virt-launcher pod UIDs of pair i+1: its client
	// VM's, then its server VM's.
	Launchers [][2]string
}

// ParseHostCPU parses --host-cpu-agent (an IP address and port) and
// --launcher-pods (per pair "<client pod uid>/<server pod uid>",
// comma-separated); both empty is no host CPU.
func ParseHostCPU(agent, launchers string) (*HostCPU, error) {
	if agent == "" && launchers == "" {
		return nil, nil
	}
	if agent == "" || launchers == "" {
		return nil, fmt.Errorf("--host-cpu-agent and --launcher-pods go together")
	}
	ap, err := netip.ParseAddrPort(agent)
	if err != nil {
		return nil, fmt.Errorf("failed to parse --host-cpu-agent %q: want <IP address>:<port>: %w", agent, err)
	}
	h := &HostCPU{Agent: ap}
	for _, pair := range strings.Split(launchers, ",") {
		c, s, ok := strings.Cut(pair, "/")
		if !ok || !podUID(c) || !podUID(s) {
			return nil, fmt.Errorf("failed to parse --launcher-pods entry %q: want <client pod uid>/<server pod uid>, each a lower-case UUID", pair)
		}
		h.Launchers = append(h.Launchers, [2]string{c, s})
	}
	return h, nil
}

// podUID reports whether s is a lower-case UUID, as the API server writes
// pod UIDs.
func podUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
				return false
			}
		}
	}
	return true
}

// Pods are the launcher UIDs of pairs 1..pairs, client then server of each.
func (h HostCPU) Pods(pairs int) []string {
	var out []string
	for _, l := range h.Launchers[:min(pairs, len(h.Launchers))] {
		out = append(out, l[0], l[1])
	}
	return out
}

// Read asks the agent for the pods' and the node's counters.
func (h HostCPU) Read(ctx context.Context, pods []string) (results.HostCPUReading, error) {
	ctx, cancel := context.WithTimeout(ctx, hostCPUTimeout)
	defer cancel()
	q := url.Values{"pod": pods}
	u := url.URL{Scheme: "http", Host: h.Agent.String(), Path: hostCPUPath, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return results.HostCPUReading{}, fmt.Errorf("failed to ask the node agent at %s for host CPU: %w", h.Agent, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return results.HostCPUReading{}, fmt.Errorf("failed to ask the node agent at %s for host CPU (is agent.hostCPU enabled in the chart?): %w", h.Agent, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return results.HostCPUReading{}, fmt.Errorf("failed to read host CPU from the node agent at %s: %s: %s", h.Agent, resp.Status, strings.TrimSpace(string(msg)))
	}
	var r results.HostCPUReading
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r); err != nil {
		return results.HostCPUReading{}, fmt.Errorf("failed to decode the node agent's host CPU reading from %s: %w", h.Agent, err)
	}
	if len(r.Pods) != len(pods) {
		return results.HostCPUReading{}, fmt.Errorf("failed to read host CPU from the node agent at %s: asked for %d pods, got %d", h.Agent, len(pods), len(r.Pods))
	}
	return r, nil
}
