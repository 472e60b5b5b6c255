package images

import (
	"encoding/binary"
	"fmt"
)

// CapabilityXattr is the extended attribute that holds a file's capabilities.
const CapabilityXattr = "security.capability"

// capNumbers are the capabilities images here set on files, by the names
// setcap(8) uses (linux/capability.h).
var capNumbers = map[string]uint{
	"cap_net_bind_service": 10,
	"cap_net_admin":        12,
	"cap_net_raw":          13,
	"cap_sys_admin":        21,
	"cap_sys_nice":         23,
	"cap_sys_ptrace":       19,
}

// FileCaps returns the security.capability value `setcap <caps>+ep` writes:
// struct vfs_cap_data revision 2 (linux/capability.h, VFS_CAP_REVISION_2 with
// VFS_CAP_FLAGS_EFFECTIVE), little endian, the capabilities permitted and
// effective, none inheritable. KubeVirt's Bazel xattrs rule sets the same
// (cmd/virt-launcher/BUILD.bazel, "setcaps"). An unknown name is an error.
func FileCaps(caps ...string) (string, error) {
	var permitted [2]uint32
	for _, c := range caps {
		n, ok := capNumbers[c]
		if !ok {
			return "", fmt.Errorf("failed to encode file capability %q: unknown", c)
		}
		permitted[n/32] |= 1 << (n % 32)
	}
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|0x1) // VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE
	binary.LittleEndian.PutUint32(b[4:], permitted[0])
	binary.LittleEndian.PutUint32(b[12:], permitted[1])
	return string(b), nil
}

// ParseFileCaps is FileCaps' inverse: the capability names permitted by a
// security.capability value, and whether they are effective.
func ParseFileCaps(v string) (caps []string, effective bool, err error) {
	b := []byte(v)
	if len(b) != 20 || binary.LittleEndian.Uint32(b[0:])&0xff000000 != 0x02000000 {
		return nil, false, fmt.Errorf("failed to parse file capabilities %x: not vfs_cap_data revision 2", b)
	}
	permitted := uint64(binary.LittleEndian.Uint32(b[4:])) | uint64(binary.LittleEndian.Uint32(b[12:]))<<32
	for name, n := range capNumbers {
		if permitted&(1<<n) != 0 {
			caps = append(caps, name)
		}
	}
	return caps, binary.LittleEndian.Uint32(b[0:])&0x1 != 0, nil
}
