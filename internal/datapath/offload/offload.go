package offload

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Features maps each netconf offload key to the kernel feature strings it
// switches (the long names `ethtool -k` prints): the Ethtool of each row of
// wellknown.Offloads, which follow ethtool(8)'s off_flag_def groups. Names a
// kernel does not know (tx-tcp-accecn-segmentation is new in 6.18) are
// skipped.
var Features = features()

func features() map[string][]string {
	out := make(map[string][]string, len(wellknown.Offloads))
	for _, row := range wellknown.Offloads {
		out[row.Name] = row.Ethtool
	}
	return out
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
// in one ETHTOOL_SFEATURES request for every changeable feature of those keys
// and verifies them as Verify does. Features the device cannot change (fixed)
// are left alone; a key none of whose features can be changed and which is
// not already as wanted is an error. When every changeable feature already is
// as wanted it changes nothing and verifies the state it read. After a
// change it verifies the state it read with the request applied when the
// kernel answers that the request was carried out exactly and no fixed
// feature of these keys is on (a veth's fixed ones are off), and otherwise
// reads the features again. The feature names are
// read once per process: 2 to 5 ioctls, buffers sized to the device (see
// ioctl.go). Each ioctl takes the kernel's RTNL lock, which every veth
// creation holds, so 20 concurrent ADDs queue on it.
func Apply(ifName string, want map[string]bool) error {
	_, err := ApplyVeth(ifName, want)
	return err
}

// Peer is what ApplyVeth learnt on one end of a veth pair, for the other end.
type Peer struct {
	want    map[string]bool
	request map[string]bool
	// after are the end's features with request carried out; nil when the
	// other end must be read (a fixed feature of the keys was on).
	after map[string]featureState
}

// ApplyVeth is Apply for one end of a veth pair this process just made; what
// it returns switches the other end with one ioctl (Peer.Apply).
func ApplyVeth(ifName string, want map[string]bool) (*Peer, error) {
	e, err := openDev(ifName)
	if err != nil {
		return nil, err
	}
	defer e.close()
	states, err := e.features()
	if err != nil {
		return nil, err
	}
	// request holds every changeable feature of the wanted keys, so that the
	// kernel's answer to it covers them all; fixedOn tells whether a feature
	// the device cannot change is on, which a change of another one may
	// still clear (TSO without checksum offload).
	request := map[string]bool{}
	differs, fixedOn := false, false
	for _, key := range keys(want) {
		names, ok := Features[key]
		if !ok {
			return nil, fmt.Errorf("failed to switch offload %q on %s: unknown offload", key, ifName)
		}
		for _, name := range names {
			st, ok := states[name]
			switch {
			case !ok:
			case st.Available:
				request[name] = want[key]
				differs = differs || st.Active != want[key]
			case st.Active:
				fixedOn = true
			}
		}
	}
	peer := &Peer{want: want, request: request}
	if differs {
		exact, err := e.change(request)
		if err != nil {
			return nil, err
		}
		if !exact || fixedOn {
			return peer, verify(e, want)
		}
		// The kernel set every requested feature as requested, and no other
		// feature of these keys can have changed.
		for name, on := range request {
			st := states[name]
			st.Active = on
			states[name] = st
		}
	}
	if !fixedOn {
		peer.after = states
	}
	return peer, verifyStates(ifName, states, want)
}

// Apply switches the offloads of ifName, the other end of the veth pair whose
// first end ApplyVeth switched, to the same want. The kernel gives both ends
// of a veth the same features when it makes them (veth_setup,
// drivers/net/veth.c), so it sends the request ApplyVeth built without
// reading the features first, and verifies what that end ended with when the
// kernel answers that the request was carried out exactly; otherwise (or
// when a fixed feature of the keys was on) it reads the features and
// verifies them, as Apply does. One ioctl instead of two. p comes from an
// ApplyVeth that succeeded.
func (p *Peer) Apply(ifName string) error {
	if p.after == nil {
		return Apply(ifName, p.want)
	}
	e, err := openDev(ifName)
	if err != nil {
		return err
	}
	defer e.close()
	exact, err := e.change(p.request)
	if err != nil {
		return err
	}
	if !exact {
		return verify(e, p.want)
	}
	return verifyStates(ifName, p.after, p.want)
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
