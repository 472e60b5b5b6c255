package offload

import (
	"fmt"
	"sort"
	"strings"
)

// Features maps each netconf offload key to the kernel feature strings it
// switches (the long names `ethtool -k` prints). The groups follow ethtool(8)'s
// off_flag_def table: "tso" is NETIF_F_ALL_TSO, "gso" is NETIF_F_GSO, "gro" is
// NETIF_F_GRO and "tx" (txChecksum) is the checksum mask
// NETIF_F_CSUM_MASK|NETIF_F_SCTP_CRC|NETIF_F_FCOE_CRC. Names a kernel does not
// know (tx-tcp-accecn-segmentation is new in 6.18) are skipped.
var Features = map[string][]string{
	"tso":        {"tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation", "tx-tcp-accecn-segmentation"},
	"gso":        {"tx-generic-segmentation"},
	"gro":        {"rx-gro"},
	"txChecksum": {"tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6", "tx-checksum-fcoe-crc", "tx-checksum-sctp"},
}

// keys returns the keys of want in a stable order.
func keys(want map[string]bool) []string {
	out := make([]string, 0, len(want))
	for k := range want {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Apply switches the offloads of ifName to want (keys of Features, true = on)
// in one ETHTOOL_SFEATURES request, then verifies them with Verify. Features
// the device cannot change (fixed) are left alone; a key none of whose
// features can be changed and which is not already as wanted is an error.
// When every changeable feature already is as wanted it changes nothing and
// verifies the state it read. It reads the feature names once (5 ioctls at
// most, buffers sized to the device; see ioctl.go).
func Apply(ifName string, want map[string]bool) error {
	e, err := openDev(ifName)
	if err != nil {
		return err
	}
	defer e.close()
	states, err := e.features()
	if err != nil {
		return err
	}
	change := map[string]bool{}
	for _, key := range keys(want) {
		names, ok := Features[key]
		if !ok {
			return fmt.Errorf("failed to switch offload %q on %s: unknown offload", key, ifName)
		}
		for _, name := range names {
			if st, ok := states[name]; ok && st.Available && st.Active != want[key] {
				change[name] = want[key]
			}
		}
	}
	if len(change) == 0 {
		return verifyStates(ifName, states, want)
	}
	if err := e.change(change); err != nil {
		return err
	}
	return verify(e, want)
}

// Verify checks that the offloads of ifName are as in want: every changeable
// feature of a key is active exactly when the key is true, and a key that is
// true has at least one active feature. The error lists every mismatch, e.g.
// "offloads of veth0 differ: gro is off, want on".
func Verify(ifName string, want map[string]bool) error {
	e, err := openDev(ifName)
	if err != nil {
		return err
	}
	defer e.close()
	return verify(e, want)
}

func verify(e *ethtoolDev, want map[string]bool) error {
	states, err := e.features()
	if err != nil {
		return err
	}
	return verifyStates(e.name, states, want)
}

func verifyStates(ifName string, states map[string]featureState, want map[string]bool) error {
	got := summarize(states)
	var diffs []string
	for _, key := range keys(want) {
		if got[key] != want[key] {
			diffs = append(diffs, fmt.Sprintf("%s is %s, want %s", key, onOff(got[key]), onOff(want[key])))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("offloads of %s differ: %s", ifName, strings.Join(diffs, "; "))
	}
	return nil
}

// Read returns the state of every key of Features on ifName. A key is on
// when all of its changeable features are active and at least one of its
// features is; anything else (including a partly switched group) is off.
func Read(ifName string) (map[string]bool, error) {
	e, err := openDev(ifName)
	if err != nil {
		return nil, err
	}
	defer e.close()
	states, err := e.features()
	if err != nil {
		return nil, err
	}
	return summarize(states), nil
}

// summarize turns feature states into the state of every key of Features.
func summarize(states map[string]featureState) map[string]bool {
	out := make(map[string]bool, len(Features))
	for key, names := range Features {
		anyActive, allChangeableActive := false, true
		for _, name := range names {
			st, ok := states[name]
			if !ok {
				continue
			}
			anyActive = anyActive || st.Active
			if st.Available && !st.Active {
				allChangeableActive = false
			}
		}
		out[key] = anyActive && allChangeableActive
	}
	return out
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
