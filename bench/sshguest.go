package bench

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// SSHGuest is a VM the runner reaches over SSH (VM mode): a user name that
// passed wellknown.ValidSSHUser and an IP address without a zone. The
// address comes from a VMI's status, which the guest's agent reports, so it
// is parsed before it is used and never passed on as text.
type SSHGuest struct {
	User string
	Addr netip.Addr
}

// String is "user@host" ("user@[v6]").
func (g SSHGuest) String() string { return netperf.SSHTarget(g.User, g.Addr) }

// ParseSSHGuest parses one entry of --ssh-clients or --ssh-servers: "host"
// (with defaultUser, --ssh-user) or "user@host", where host is an IPv4 or
// IPv6 address (an IPv6 one with or without brackets) and user a POSIX user
// name (wellknown.SSHUserPattern). A host name, a zone ("fe80::1%eth0"), or
// anything that starts with '-' is refused: errors name the flag and the
// allowed form.
func ParseSSHGuest(flag, s, defaultUser string) (SSHGuest, error) {
	user, host := defaultUser, s
	if u, h, ok := strings.Cut(s, "@"); ok {
		user, host = u, h
	}
	if user == "" {
		return SSHGuest{}, fmt.Errorf("failed to parse %s entry %q: no user: give user@address or --ssh-user", flag, s)
	}
	if !wellknown.ValidSSHUser(user) {
		return SSHGuest{}, fmt.Errorf("failed to parse %s entry %q: user %q is not a POSIX user name (1-%d letters, digits, '_', '.' or '-', starting with a letter or '_')", flag, s, user, wellknown.SSHUserMaxLength)
	}
	if b, ok := strings.CutPrefix(host, "["); ok {
		host, ok = strings.CutSuffix(b, "]")
		if !ok {
			return SSHGuest{}, fmt.Errorf("failed to parse %s entry %q: unclosed '['", flag, s)
		}
	}
	addr, err := ParseIP(host)
	if err != nil {
		return SSHGuest{}, fmt.Errorf("failed to parse %s entry %q: %w", flag, s, err)
	}
	return SSHGuest{User: user, Addr: addr}, nil
}

// ParseIP parses an IPv4 or IPv6 address without a zone (a zone names an
// interface, which is the sender's to choose, not the runner's).
func ParseIP(s string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(s)
	if err != nil || addr.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 or IPv6 address without a zone", s)
	}
	return addr, nil
}

// ParseSSHGuests parses a comma-separated list of ParseSSHGuest entries.
func ParseSSHGuests(flag, list, defaultUser string) ([]SSHGuest, error) {
	var out []SSHGuest
	for _, s := range ParseList(list) {
		g, err := ParseSSHGuest(flag, s, defaultUser)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}
