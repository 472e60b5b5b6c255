package images

// GuestKernelBootRef names the kernel boot container image of the real
// guests (hack/guest-image.sh) on the local cluster with KubeVirt.
const GuestKernelBootRef = Registry + "/fastpath-guest:" + Tag

// Where GuestKernelBootTarget has the guest's kernel and initramfs: a VM's
// spec.domain.firmware.kernelBoot.container kernelPath and initrdPath.
const (
	GuestKernelPath = "/boot/vmlinuz"
	GuestInitrdPath = "/boot/initramfs.gz"
)

// GuestKernelBootTarget is the real guests' kernel and initramfs
// (bin/guest, built by hack/guest-image.sh: Debian's cloud kernel, busybox,
// netperf, socat, ethtool, dropbear) as a KubeVirt kernel boot container
// image, for VMs on the local cluster, which can pull no disk image from a
// registry. KubeVirt runs it with its own container-disk program mounted at
// /usr/bin (pkg/container-disk), so it needs nothing but the two files.
// Built and imported only when named (make kubevirt-images), like
// KubeVirtTargets.
var GuestKernelBootTarget = Target{
	Name: "guest-kernel-boot", Ref: GuestKernelBootRef, Base: baseScratch,
	Binaries: []Binary{
		{Name: "vmlinuz", File: "bin/guest/vmlinuz", Path: GuestKernelPath},
		{Name: "initramfs.gz", File: "bin/guest/initramfs.gz", Path: GuestInitrdPath},
	},
}
