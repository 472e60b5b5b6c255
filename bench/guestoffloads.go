package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// guestOffloadsScript prints the interface the machine routes to $1
// through, then `ethtool -k` of it. $1 is an address ParseIP accepted.
const guestOffloadsScript = `dev=$(ip -o route get "$1" | sed -n 's/.* dev \([^ ]*\).*/\1/p')
[ -n "$dev" ] || { echo "no route to $1" >&2; exit 3; }
echo "$dev"
ethtool -k "$dev"`

// GuestOffloads returns the interface a VM-mode client guest routes to
// server through and the offloads it negotiated there, read with the
// guest's own `ip route get` and `ethtool -k` through ex (the guest's SSH
// executor), as results.Run.Interface and Offloads. server must be an IP
// address (ParseIP). It fails when the guest has no route, no ethtool (the
// sample VMs' cloud-init installs it), or ethtool printed none of the
// offloads.
func GuestOffloads(ctx context.Context, ex netperf.Executor, server string) (string, map[string]string, error) {
	addr, err := ParseIP(server)
	if err != nil {
		return "", nil, fmt.Errorf("failed to read the offloads towards %s in %s: %w", server, ex, err)
	}
	stdout, stderr, err := ex.Run(ctx, []string{"sh", "-c", guestOffloadsScript, "sh", addr.String()})
	if err != nil {
		return "", nil, fmt.Errorf("failed to read the offloads towards %s in %s: %w: %s", addr, ex, err, strings.TrimSpace(string(stderr)))
	}
	dev, rest, _ := bytes.Cut(stdout, []byte("\n"))
	offloads := ParseEthtoolK(rest)
	if len(offloads) == 0 {
		return "", nil, fmt.Errorf("failed to read the offloads of %s in %s: ethtool -k printed none of %s", dev, ex, strings.Join(wellknown.OffloadNames(), ", "))
	}
	return string(dev), offloads, nil
}

// ParseEthtoolK reads `ethtool -k` output: each offload of
// wellknown.Offloads whose group line (Offload.EthtoolGroup, e.g.
// "tcp-segmentation-offload: on [fixed]") it prints, to "on" or "off".
// ethtool prints a group "on" when any feature of it is active, where
// LocalOffloads wants every changeable one: the two agree unless a group is
// partly switched. Indented lines (single features) and unknown groups are
// skipped.
func ParseEthtoolK(out []byte) map[string]string {
	byGroup := map[string]string{}
	for _, row := range wellknown.Offloads {
		byGroup[row.EthtoolGroup] = row.Name
	}
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		group, value, ok := strings.Cut(line, ":")
		name, known := byGroup[group]
		if !ok || !known {
			continue
		}
		if f := strings.Fields(value); len(f) > 0 && (f[0] == "on" || f[0] == "off") {
			got[name] = f[0]
		}
	}
	return got
}
