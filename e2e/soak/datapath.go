package soak

import (
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// datapath is what the agent must not change on a restart: the bridge's
// ifindex, its ports and their state, and the port security chains of the
// ports (nft -a, so a re-created rule shows a new handle; counters left out).
type datapath struct {
	bridgeIndex int
	ports       []string // "<name> index <i> up <bool>"
	chains      string
}

var nftCounter = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// readDatapath reads the datapath of bridge name.
func readDatapath(name string) (datapath, error) {
	var d datapath
	br, err := netlink.LinkByName(name)
	if err != nil {
		return d, fmt.Errorf("failed to look up bridge %s: %w", name, err)
	}
	d.bridgeIndex = br.Attrs().Index
	links, err := netlink.LinkList()
	if err != nil {
		return d, fmt.Errorf("failed to list links: %w", err)
	}
	var b strings.Builder
	for _, l := range links {
		a := l.Attrs()
		if a.MasterIndex != d.bridgeIndex {
			continue
		}
		d.ports = append(d.ports, fmt.Sprintf("%s index %d up %t", a.Name, a.Index, a.Flags&net.FlagUp != 0))
		out, err := exec.Command("nft", "-a", "list", "chain", "bridge", wellknown.PortSecurityTable, "port-"+a.Name).CombinedOutput()
		if err != nil {
			return d, fmt.Errorf("failed to list the port security chain of %s: %w: %s", a.Name, err, lastLine(string(out)))
		}
		b.WriteString(nftCounter.ReplaceAllString(string(out), "counter"))
	}
	slices.Sort(d.ports)
	d.chains = b.String()
	return d, nil
}

// portNames returns the names of d's ports.
func (d datapath) portNames() []string {
	var out []string
	for _, p := range d.ports {
		out = append(out, strings.Fields(p)[0])
	}
	return out
}

// diff says how d differs from before; empty when it does not.
func (d datapath) diff(before datapath) string {
	var out []string
	if d.bridgeIndex != before.bridgeIndex {
		out = append(out, fmt.Sprintf("bridge ifindex %d, was %d", d.bridgeIndex, before.bridgeIndex))
	}
	if !slices.Equal(d.ports, before.ports) {
		out = append(out, fmt.Sprintf("ports %v, were %v", d.ports, before.ports))
	}
	if d.chains != before.chains {
		out = append(out, "port security chains changed")
	}
	return strings.Join(out, "; ")
}
