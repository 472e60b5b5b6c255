package emulation

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// maxHashedIfaceLen is KubeVirt's cut of the hashed pod interface name: the
// kernel's 15 characters minus the 4 of the "-nic" suffix the bridge binding
// adds (kubevirt pkg/network/namescheme, maxIfaceNameLen).
const maxHashedIfaceLen = 11

// hashedIfacePrefix is KubeVirt's HashedIfacePrefix (pkg/network/namescheme).
const hashedIfacePrefix = "pod"

// PodInterfaceName returns the virt-launcher pod interface name KubeVirt gives
// the secondary (Multus) network networkName, the VM's logical network name:
// "pod" followed by the first 11 hex digits of sha256(networkName), e.g.
// "pod16477688c0e" for "blue" (kubevirt pkg/network/namescheme,
// GenerateHashedInterfaceName). Multus passes it to the CNI as CNI_IFNAME.
func PodInterfaceName(networkName string) string {
	h := sha256.New()
	_, _ = io.WriteString(h, networkName)
	return hashedIfacePrefix + hex.EncodeToString(h.Sum(nil))[:maxHashedIfaceLen]
}

// sandboxID derives a 64-hex-digit container ID (the shape of a CRI sandbox
// ID, passed as CNI_CONTAINERID) from the emulator prefix and the VMI UID.
func sandboxID(prefix, uid string) string {
	sum := sha256.Sum256([]byte(prefix + "/" + uid))
	return hex.EncodeToString(sum[:])
}

// launcherPodName is the emulated virt-launcher pod name,
// "virt-launcher-<vmi>-<5 characters>" as KubeVirt's generated names look.
func launcherPodName(vmi, uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return fmt.Sprintf("virt-launcher-%s-%s", vmi, hex.EncodeToString(sum[:])[:5])
}

// hostIfName is the host end of a launcher's pod-network veth: the prefix
// (at most 8 characters) and hex digits of the VMI UID, 15 characters at most.
func hostIfName(prefix, uid string) string {
	sum := sha256.Sum256([]byte(uid))
	n := 15 - len(prefix)
	return prefix + hex.EncodeToString(sum[:])[:n]
}
