package offload

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file speaks the ethtool feature ioctls (Linux
// include/uapi/linux/ethtool.h) with buffers sized to the device's feature
// count. github.com/safchain/ethtool v0.7.0 allocates and zeroes a 1 MiB
// string table (MAX_GSTRINGS x ETH_GSTRING_LEN) on every FeaturesWithState
// and Change: 6 MiB per CNI ADD, the largest part of its CPU time in a
// profile of 20 ADDs (issue 13; perf record: offload.Apply 15 % of all
// samples, mostly safchain's getNames and the garbage collector). A veth
// has about 70 features, which fit in 2.3 KiB of strings and 3 blocks.

// Ethtool commands and string set (include/uapi/linux/ethtool.h).
const (
	ethtoolGSSetInfo  = 0x37
	ethtoolGStrings   = 0x1b
	ethtoolGFeatures  = 0x3a
	ethtoolSFeatures  = 0x3b
	ethSSFeatures     = 4
	ethGStringLen     = 32
	maxFeatureStrings = 4096 // far above any kernel's NETDEV_FEATURE_COUNT (< 128)
)

// featureNames are the kernel's feature names and their bits, read once per
// process: ETH_SS_FEATURES is the kernel's own table (netdev_features_strings,
// net/ethtool/common.c), the same for every device and network namespace
// (__ethtool_get_sset_count answers its size for any device), so the two ends
// of a veth pair need not read it twice.
var featureNames struct {
	sync.Mutex
	names map[string]uint32
	count uint32
}

// featureState is one feature's bits from ETHTOOL_GFEATURES, as `ethtool -k`
// reads them: Available means the feature can be changed.
type featureState struct {
	Available, Active bool
}

// ifreq is struct ifreq with ifr_data (SIOCETHTOOL).
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data uintptr
	_    [16]byte
}

// ethtoolDev issues ethtool ioctls for one interface in the calling
// thread's network namespace.
type ethtoolDev struct {
	fd   int
	name string
	// names maps feature names to their bit (featureNames).
	names map[string]uint32
	count uint32
}

func openDev(ifName string) (*ethtoolDev, error) {
	if len(ifName) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("failed to open ethtool socket for %s: interface name longer than %d bytes", ifName, unix.IFNAMSIZ-1)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("failed to open ethtool socket for %s: %w", ifName, err)
	}
	return &ethtoolDev{fd: fd, name: ifName}, nil
}

func (d *ethtoolDev) close() { _ = unix.Close(d.fd) }

// ioctl runs SIOCETHTOOL with buf as the command buffer.
func (d *ethtoolDev) ioctl(buf []byte) error {
	_, err := d.ioctlRet(buf)
	return err
}

// ioctlRet is ioctl that also returns the ioctl's non-negative result.
func (d *ethtoolDev) ioctlRet(buf []byte) (uintptr, error) {
	var ifr ifreq
	copy(ifr.name[:], d.name)
	ifr.data = uintptr(unsafe.Pointer(&buf[0]))
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(buf)
	if errno != 0 {
		return 0, errno
	}
	return r, nil
}

func put32(b []byte, off int, v uint32) { *(*uint32)(unsafe.Pointer(&b[off])) = v }
func get32(b []byte, off int) uint32    { return *(*uint32)(unsafe.Pointer(&b[off])) }

// loadNames reads the feature names (ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS)
// unless this process already has them (featureNames).
func (d *ethtoolDev) loadNames() error {
	if d.names != nil {
		return nil
	}
	featureNames.Lock()
	defer featureNames.Unlock()
	if featureNames.names != nil {
		d.names, d.count = featureNames.names, featureNames.count
		return nil
	}
	// struct ethtool_sset_info: cmd, reserved, u64 sset_mask, u32 data[1].
	info := make([]byte, 24)
	put32(info, 0, ethtoolGSSetInfo)
	*(*uint64)(unsafe.Pointer(&info[8])) = 1 << ethSSFeatures
	if err := d.ioctl(info); err != nil {
		return fmt.Errorf("failed to read the feature count of %s: %w", d.name, err)
	}
	n := get32(info, 16)
	if *(*uint64)(unsafe.Pointer(&info[8])) == 0 || n == 0 || n > maxFeatureStrings {
		return fmt.Errorf("failed to read the feature names of %s: the kernel reports %d features", d.name, n)
	}
	// struct ethtool_gstrings: cmd, string_set, len, then len x 32 bytes.
	strs := make([]byte, 12+int(n)*ethGStringLen)
	put32(strs, 0, ethtoolGStrings)
	put32(strs, 4, ethSSFeatures)
	put32(strs, 8, n)
	if err := d.ioctl(strs); err != nil {
		return fmt.Errorf("failed to read the feature names of %s: %w", d.name, err)
	}
	names := make(map[string]uint32, n)
	for i := range n {
		s := strs[12+int(i)*ethGStringLen : 12+int(i+1)*ethGStringLen]
		if j := bytes.IndexByte(s, 0); j >= 0 {
			s = s[:j]
		}
		if len(s) > 0 {
			names[string(s)] = i
		}
	}
	featureNames.names, featureNames.count = names, n
	d.names, d.count = names, n
	return nil
}

func (d *ethtoolDev) blocks() int { return int(d.count+31) / 32 }

// features reads every feature's state (ETHTOOL_GFEATURES).
func (d *ethtoolDev) features() (map[string]featureState, error) {
	if err := d.loadNames(); err != nil {
		return nil, err
	}
	// struct ethtool_gfeatures: cmd, size, then size x {available,
	// requested, active, never_changed}.
	buf := make([]byte, 8+16*d.blocks())
	put32(buf, 0, ethtoolGFeatures)
	put32(buf, 4, uint32(d.blocks()))
	if err := d.ioctl(buf); err != nil {
		return nil, fmt.Errorf("failed to read offload features of %s: %w", d.name, err)
	}
	out := make(map[string]featureState, len(d.names))
	for name, bit := range d.names {
		off := 8 + 16*int(bit/32)
		mask := uint32(1) << (bit % 32)
		out[name] = featureState{
			Available: get32(buf, off)&mask != 0,
			Active:    get32(buf, off+8)&mask != 0,
		}
	}
	return out, nil
}

// ETHTOOL_SFEATURES result bits (include/uapi/linux/ethtool.h,
// ethtool_sfeatures_retval_bits): a requested feature cannot be changed
// (UNSUPPORTED), or the device's features differ from the request after it
// (WISH, e.g. TSO dropped for lack of checksum offload).
const (
	ethtoolFUnsupported = 1 << 0
	ethtoolFWish        = 1 << 1
)

// change requests the features in want (ETHTOOL_SFEATURES); every name must
// be one the device has. exact is true when the kernel reports that every
// requested feature is now as requested (no ETHTOOL_F_* bit in the result).
func (d *ethtoolDev) change(want map[string]bool) (exact bool, err error) {
	if err := d.loadNames(); err != nil {
		return false, err
	}
	// struct ethtool_sfeatures: cmd, size, then size x {valid, requested}.
	buf := make([]byte, 8+8*d.blocks())
	put32(buf, 0, ethtoolSFeatures)
	put32(buf, 4, uint32(d.blocks()))
	for name, on := range want {
		bit, ok := d.names[name]
		if !ok {
			return false, fmt.Errorf("failed to switch offloads of %s: unknown feature %q", d.name, name)
		}
		off := 8 + 8*int(bit/32)
		mask := uint32(1) << (bit % 32)
		put32(buf, off, get32(buf, off)|mask)
		if on {
			put32(buf, off+4, get32(buf, off+4)|mask)
		}
	}
	r, err := d.ioctlRet(buf)
	if err != nil {
		return false, fmt.Errorf("failed to switch offloads %v of %s: %w", want, d.name, err)
	}
	return r&(ethtoolFUnsupported|ethtoolFWish) == 0, nil
}
