package macvtap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrLowerNotFound is wrapped by Lower when no link of that name exists.
var ErrLowerNotFound = errors.New("macvtap lower device not found")

// linkType is netlink's Type() of a macvtap.
const linkType = "macvtap"

// Lower returns the link name in the current network namespace (the host's):
// the lower device the macvtaps are made on. The error wraps
// ErrLowerNotFound when there is no such link.
func Lower(name string) (netlink.Link, error) {
	link, err := netlinksafe.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil, fmt.Errorf("failed to find macvtap lower device %s: %w", name, ErrLowerNotFound)
		}
		return nil, fmt.Errorf("failed to look up macvtap lower device %s: %w", name, err)
	}
	return link, nil
}

// Spec is one macvtap to create.
type Spec struct {
	// Name is the interface name in the netns (CNI_IFNAME).
	Name string
	// MTU in bytes; at most the lower device's (the kernel refuses more).
	MTU int
	// MAC is the address ("" lets the kernel choose one).
	MAC string
	// Index is the interface index to ask for (0 lets the kernel choose):
	// the kernel names the macvtap's character device /dev/tap<index>.
	Index int
	// Alias names the attachment (IFLA_IFALIAS), so that Delete removes only
	// this attachment's macvtap; "" sets none.
	Alias string
	// DeviceOwner, when set with Index, is given /dev/tap<Index> on the node
	// (the kernel makes it root's, mode 0600): the container runtime copies
	// the node's ownership into the container it hands the device to. Only
	// a macvtap character device is given, never through a symbolic link
	// (GiveDevice).
	DeviceOwner *Owner
}

// Owner is a user and group ID.
type Owner struct{ UID, GID int }

// DevDir is where the node's character devices are (devtmpfs): the kernel
// makes /dev/tap<index> there before RTM_NEWLINK returns.
var DevDir = "/dev"

// ProcDevices is the kernel's list of device majors.
var ProcDevices = "/proc/devices"

// TapMajor returns the major number of macvtap character devices: the one
// the kernel registered as "macvtap" in ProcDevices' "Character devices:"
// section when the macvtap module loaded (drivers/net/macvtap.c,
// tap_create_cdev). Errors: the file unreadable, no such entry.
func TapMajor() (uint32, error) {
	b, err := os.ReadFile(ProcDevices)
	if err != nil {
		return 0, fmt.Errorf("failed to read the device majors: %w", err)
	}
	char := false
	for _, line := range strings.Split(string(b), "\n") {
		switch f := strings.Fields(line); {
		case line == "Character devices:":
			char = true
		case strings.HasSuffix(line, "devices:"):
			char = false
		case char && len(f) == 2 && f[1] == "macvtap":
			n, err := strconv.ParseUint(f[0], 10, 32)
			if err != nil {
				return 0, fmt.Errorf("failed to parse the macvtap major %q in %s: %w", f[0], ProcDevices, err)
			}
			return uint32(n), nil
		}
	}
	return 0, fmt.Errorf("no macvtap character device major in %s (is the macvtap module loaded?)", ProcDevices)
}

// GiveDevice gives the character device at path to owner, never following
// a symbolic link: it opens path itself (O_PATH|O_NOFOLLOW: a symbolic link
// is opened as the link), checks that the inode is a character device of
// major, and changes that inode's owner (fchownat with AT_EMPTY_PATH on the
// open descriptor), so what was checked is what changes, whatever is
// renamed meanwhile. The mode stays as it is. Errors name path and say what
// it is instead.
func GiveDevice(path string, major uint32, owner Owner) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("failed to stat %s: %w", path, err)
	}
	switch t := st.Mode & unix.S_IFMT; {
	case t == unix.S_IFLNK:
		return fmt.Errorf("refusing to change the owner of %s: it is a symbolic link, not the macvtap's character device", path)
	case t != unix.S_IFCHR:
		return fmt.Errorf("refusing to change the owner of %s: it is not a character device (mode %#o)", path, st.Mode)
	case unix.Major(st.Rdev) != major:
		return fmt.Errorf("refusing to change the owner of %s: character device %d:%d is not a macvtap's (major %d)", path, unix.Major(st.Rdev), unix.Minor(st.Rdev), major)
	}
	if err := unix.Fchownat(fd, "", owner.UID, owner.GID, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("failed to change the owner of %s to %d:%d: %w", path, owner.UID, owner.GID, err)
	}
	return nil
}

// Create makes s as a bridge-mode macvtap on lower directly in netns (one
// RTM_NEWLINK with IFLA_NET_NS_FD: the link never exists in the host
// namespace), sets its alias there, and returns it as read back in netns,
// still down. Errors name the interface, the lower device and, for an
// interface index that is taken in netns (EEXIST with s.Index set), the index.
// On an error after the link was made it deletes the link again.
func Create(netns ns.NetNS, lower netlink.Link, s Spec) (netlink.Link, error) {
	// TxQLen -1 leaves the kernel's default (TUN_READQ_SIZE, 500): a
	// macvtap's tx queue length is the size of the ring its tap queues
	// receive into (tap_open, drivers/net/tap.c), and with 0, which a zero
	// LinkAttrs would send, every frame for QEMU is dropped.
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU, attrs.ParentIndex, attrs.Index = s.Name, s.MTU, lower.Attrs().Index, s.Index
	attrs.Namespace = netlink.NsFd(int(netns.Fd()))
	if s.MAC != "" {
		hw, err := net.ParseMAC(s.MAC)
		if err != nil {
			return nil, fmt.Errorf("failed to create macvtap %s: MAC %q: %w", s.Name, s.MAC, err)
		}
		attrs.HardwareAddr = hw
	}
	mv := &netlink.Macvtap{Macvlan: netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}}
	if err := netlink.LinkAdd(mv); err != nil {
		where := fmt.Sprintf("macvtap %s on %s in %s", s.Name, lower.Attrs().Name, netns.Path())
		if errors.Is(err, unix.EEXIST) && s.Index != 0 {
			return nil, fmt.Errorf("failed to create %s: a link named %s or with interface index %d exists there: %w", where, s.Name, s.Index, err)
		}
		return nil, fmt.Errorf("failed to create %s (MTU %d, index %d): %w", where, s.MTU, s.Index, err)
	}
	if s.Index != 0 && s.DeviceOwner != nil {
		dev := filepath.Join(DevDir, fmt.Sprintf("tap%d", s.Index))
		major, err := TapMajor()
		if err == nil {
			err = GiveDevice(dev, major, *s.DeviceOwner)
		}
		if err != nil {
			_ = netns.Do(func(ns.NetNS) error { return netlink.LinkDel(mv) })
			return nil, fmt.Errorf("failed to give the character device of macvtap %s to %d:%d (its consumer, QEMU in virt-launcher, runs as that user): %w",
				s.Name, s.DeviceOwner.UID, s.DeviceOwner.GID, err)
		}
	}
	var link netlink.Link
	err := netns.Do(func(ns.NetNS) error {
		l, err := netlinksafe.LinkByName(s.Name)
		if err != nil {
			return fmt.Errorf("failed to look up macvtap %s after creating it: %w", s.Name, err)
		}
		if s.Alias != "" {
			if err := netlink.LinkSetAlias(l, s.Alias); err != nil {
				_ = netlink.LinkDel(l)
				return fmt.Errorf("failed to set the alias of macvtap %s: %w", s.Name, err)
			}
			// Not read back again: one request less on the RTNL lock
			// that concurrent ADDs queue on.
			l.Attrs().Alias = s.Alias
		}
		link = l
		return nil
	})
	if err != nil {
		return nil, err
	}
	return link, nil
}

// Delete deletes the macvtap name in the network namespace at netnsPath. A
// missing namespace or link is not an error (the macvtap goes with its
// namespace). A link of that name that is not a macvtap, or whose alias is
// set and differs from alias, is left alone and reported.
func Delete(netnsPath, name, alias string) error {
	if netnsPath == "" {
		return nil
	}
	netns, err := ns.GetNS(netnsPath)
	if err != nil {
		var gone ns.NSPathNotExistErr
		if errors.As(err, &gone) {
			return nil
		}
		return fmt.Errorf("failed to open netns %s to delete macvtap %s: %w", netnsPath, name, err)
	}
	defer netns.Close()
	return netns.Do(func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(name)
		if err != nil {
			var notFound netlink.LinkNotFoundError
			if errors.As(err, &notFound) {
				return nil
			}
			return fmt.Errorf("failed to look up macvtap %s in %s: %w", name, netnsPath, err)
		}
		if link.Type() != linkType {
			return fmt.Errorf("failed to delete macvtap %s in %s: it is a %s link, not a macvtap; left alone", name, netnsPath, link.Type())
		}
		if got := link.Attrs().Alias; alias != "" && got != "" && got != alias {
			return fmt.Errorf("failed to delete macvtap %s in %s: its alias %q names another attachment than %q; left alone", name, netnsPath, got, alias)
		}
		if err := netlink.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("failed to delete macvtap %s in %s: %w", name, netnsPath, err)
		}
		return nil
	})
}

// Verify checks, in the current network namespace, that name is a
// bridge-mode macvtap on the lower device with interface index lowerIndex
// (in the host namespace), up, with a tx queue length above 0 (the size of
// its tap queues' rings), with mtu, and with mac and alias when they are
// not "". The error lists what differs.
func Verify(name string, lowerIndex, mtu int, mac, alias string) error {
	link, err := netlinksafe.LinkByName(name)
	if err != nil {
		return fmt.Errorf("failed to check macvtap %s: %w", name, err)
	}
	mv, ok := link.(*netlink.Macvtap)
	if !ok {
		return fmt.Errorf("failed to check macvtap %s: it is a %s link", name, link.Type())
	}
	a := mv.Attrs()
	var diffs []string
	if mv.Mode != netlink.MACVLAN_MODE_BRIDGE {
		diffs = append(diffs, fmt.Sprintf("mode is %d, want bridge (%d)", mv.Mode, netlink.MACVLAN_MODE_BRIDGE))
	}
	if a.ParentIndex != lowerIndex {
		diffs = append(diffs, fmt.Sprintf("lower device index is %d, want %d", a.ParentIndex, lowerIndex))
	}
	if a.MTU != mtu {
		diffs = append(diffs, fmt.Sprintf("MTU is %d, want %d", a.MTU, mtu))
	}
	if a.Flags&net.FlagUp == 0 {
		diffs = append(diffs, "it is down")
	}
	if a.TxQLen <= 0 {
		diffs = append(diffs, fmt.Sprintf("tx queue length is %d: its tap queues would drop every frame", a.TxQLen))
	}
	if mac != "" && a.HardwareAddr.String() != mac {
		diffs = append(diffs, fmt.Sprintf("MAC is %s, want %s", a.HardwareAddr, mac))
	}
	if alias != "" && a.Alias != alias {
		diffs = append(diffs, fmt.Sprintf("alias is %q, want %q", a.Alias, alias))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("failed to check macvtap %s: %s", name, strings.Join(diffs, "; "))
	}
	return nil
}

// Exists reports whether the network namespace at netnsPath holds a macvtap
// called name.
func Exists(netnsPath, name string) (bool, error) {
	netns, err := ns.GetNS(netnsPath)
	if err != nil {
		var gone ns.NSPathNotExistErr
		if errors.As(err, &gone) {
			return false, nil
		}
		return false, fmt.Errorf("failed to open netns %s: %w", netnsPath, err)
	}
	defer netns.Close()
	found := false
	err = netns.Do(func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(name)
		if err != nil {
			var notFound netlink.LinkNotFoundError
			if errors.As(err, &notFound) {
				return nil
			}
			return err
		}
		found = link.Type() == linkType
		return nil
	})
	return found, err
}
