package netconf

import (
	"strconv"
	"strings"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Device IDs of the macvtap device plugin. The node agent offers, per
// Macvtap network, devices whose IDs are "tap<N>" with N in
// [MinTapIndex, MaxTapIndex]; the CNI plugin creates the pod's macvtap with
// interface index N, so the kernel names its character device /dev/tap<N>
// (drivers/net/macvtap.c names it after the ifindex), which is the node
// kubelet put into the compute container when the device plugin allocated
// "tap<N>". Indexes this high are never reached by the kernel's own
// allocation in a pod's namespace (it counts up from 1 per namespace), and
// picking the index is what lets the device plugin name /dev/tap<N> before
// the CNI plugin runs.
const (
	// DeviceIDPrefix starts every macvtap device ID.
	DeviceIDPrefix = "tap"
	// MinTapIndex is the smallest interface index of a device ID: 2^30.
	MinTapIndex = 1 << 30
	// MaxTapIndex is the largest: 2^30 + 2^20 - 1.
	MaxTapIndex = MinTapIndex + 1<<20 - 1
)

// FormatDeviceID returns the device ID of interface index index: "tap<index>".
func FormatDeviceID(index int) string { return DeviceIDPrefix + strconv.Itoa(index) }

// ParseDeviceID returns the interface index of a macvtap device ID
// ("tap<N>", N in [MinTapIndex, MaxTapIndex], decimal without a sign or
// leading zeros). The error is a *types.Error with code
// ErrInvalidNetworkConfig naming the field deviceID.
func ParseDeviceID(id string) (int, error) {
	digits, ok := strings.CutPrefix(id, DeviceIDPrefix)
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || digits != strconv.Itoa(n) || n < MinTapIndex || n > MaxTapIndex {
		return 0, invalid("deviceID %q is invalid on datapath %s: must be %s<N> with N in %d-%d, as the node agent's macvtap device plugin allocates",
			id, DatapathMacvtap, DeviceIDPrefix, MinTapIndex, MaxTapIndex)
	}
	return n, nil
}

// macvtapFixedOffloads explains why datapath Macvtap takes no offload
// false: the kernel keeps some offloads on for every macvlan and macvtap
// device (ALWAYS_ON_OFFLOADS: TSO, GSO, TX checksum; drivers/net/macvlan.c)
// and gives it the others from the lower device (GRO among them; ethtool -k
// shows them fixed), whose offloads the node agent turns all on. The guest's
// own offloads are QEMU's (TUNSETOFFLOAD on the tap), set by the domain hook.
const macvtapFixedOffloads = "the kernel keeps a macvtap's offloads on or takes them from its lower device, whose offloads the node agent turns on"

// validateMacvtap checks what only datapath Macvtap requires: every offload
// true, and a well-formed deviceID when there is one.
func (c *NetConf) validateMacvtap() error {
	for _, row := range wellknown.Offloads {
		if !**c.Offloads.Offload(row.Name) {
			return invalid("offloads.%s false is not possible on datapath %s: %s", row.Name, DatapathMacvtap, macvtapFixedOffloads)
		}
	}
	if c.DeviceID != "" {
		if _, err := ParseDeviceID(c.DeviceID); err != nil {
			return err
		}
	}
	return nil
}

// TapIndex returns the interface index the macvtap of c must get: the one
// its DeviceID names, or 0 (the kernel chooses) without a DeviceID. Errors
// as ParseDeviceID.
func (c *NetConf) TapIndex() (int, error) {
	if c.DeviceID == "" {
		return 0, nil
	}
	return ParseDeviceID(c.DeviceID)
}
