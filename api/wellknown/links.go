package wellknown

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Links Fastpath names itself on a node. Besides the devices an admin names
// in a FastPathNetwork's spec.bridge (a Linux or OVS bridge, a macvtap lower
// device), the node agent and the CNI plugin make links whose names they
// derive: a prefix and a fixed number of lowercase hex digits, 15 characters
// at most (IFNAMSIZ-1). Each row is one kind; the agent and the plugin make
// the names with the functions below, and the NAD admission policy
// (charts/fastpath, fastpath-nad-derived-devices) refuses every name of the
// form DerivedLinkPattern, which its tests hold equal to this table. No
// prefix is a hex digit string followed by another row's prefix, so the
// forms never overlap ('n' and 'l' are not hex digits).
const (
	// TempLinkPrefix names a bridge or a macvtap lower device (or its peer)
	// while the agent makes it: "fpnew" and 8 hex digits of randomness; an
	// agent killed before the rename leaves one, marked.
	TempLinkPrefix    = "fpnew"
	TempLinkHexDigits = 8
	// LowerPeerPrefix names the peer of a macvtap lower device: "fpl" and the
	// first 12 hex digits of sha256(lower) (LowerPeerName).
	LowerPeerPrefix    = "fpl"
	LowerPeerHexDigits = 12
	// HostVethPrefix names the host end of a pod's veth (datapaths LinuxBridge
	// and OVS): "fp" and the first 13 hex digits of sha256(containerID NUL
	// ifName) (HostVethName).
	HostVethPrefix    = "fp"
	HostVethHexDigits = 13
)

// DerivedLink is one kind of link Fastpath names itself.
type DerivedLink struct {
	Prefix    string
	HexDigits int
	// What the link is, for messages and docs.
	What string
}

// DerivedLinks are the kinds of derived link names, one row each.
var DerivedLinks = []DerivedLink{
	{Prefix: TempLinkPrefix, HexDigits: TempLinkHexDigits, What: "a bridge or macvtap lower device the node agent is making (temporary name)"},
	{Prefix: LowerPeerPrefix, HexDigits: LowerPeerHexDigits, What: "the peer of a macvtap lower device"},
	{Prefix: HostVethPrefix, HexDigits: HostVethHexDigits, What: "the host end of a pod's veth"},
}

// DerivedLinkPattern is the RE2 expression that matches any derived link
// name as a whole JSON string, quotes included:
// "(fpnew[0-9a-f]{8}|fpl[0-9a-f]{12}|fp[0-9a-f]{13})" with the quotes. The
// NAD admission policy uses it verbatim (CEL matches() is RE2, unanchored).
func DerivedLinkPattern() string {
	alts := make([]string, len(DerivedLinks))
	for i, d := range DerivedLinks {
		alts[i] = d.Prefix + "[0-9a-f]{" + strconv.Itoa(d.HexDigits) + "}"
	}
	return `"(` + strings.Join(alts, "|") + `)"`
}

// DerivedLinkKind returns the row of DerivedLinks whose form name has, and
// false when it has none.
func DerivedLinkKind(name string) (DerivedLink, bool) {
	for _, d := range DerivedLinks {
		rest, ok := strings.CutPrefix(name, d.Prefix)
		if ok && len(rest) == d.HexDigits && strings.Trim(rest, "0123456789abcdef") == "" {
			return d, true
		}
	}
	return DerivedLink{}, false
}

// hexName is prefix followed by the first digits hex digits of b's hex.
func hexName(prefix string, b []byte, digits int) string {
	return prefix + hex.EncodeToString(b)[:digits]
}

// TempLinkName returns the temporary name of a link the agent is making,
// from 4 random bytes.
func TempLinkName(rnd [4]byte) string {
	return hexName(TempLinkPrefix, rnd[:], TempLinkHexDigits)
}

// LowerPeerName returns the name of the peer of the macvtap lower device
// lower, so that it is known from the lower's name alone.
func LowerPeerName(lower string) string {
	sum := sha256.Sum256([]byte(lower))
	return hexName(LowerPeerPrefix, sum[:], LowerPeerHexDigits)
}

// HostVethName returns the name of the host end of the attachment
// containerID/ifName. The hash keeps the name stable for DEL and GC without
// any state; NUL cannot occur in either part, so distinct attachments hash
// distinct inputs.
func HostVethName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "\x00" + ifName))
	return hexName(HostVethPrefix, sum[:], HostVethHexDigits)
}

// NetworkLinkNames returns the links the node agent makes on a node for a
// FastPathNetwork of datapath and spec.bridge: the bridge (LinuxBridge,
// OVS), or the macvtap lower device and its peer (Macvtap).
func NetworkLinkNames(datapath, bridge string) []string {
	if datapath == DatapathMacvtap {
		return []string{bridge, LowerPeerName(bridge)}
	}
	return []string{bridge}
}
