// Package deviceplugin is the node agent's kubelet device plugin (API
// v1beta1): a Server offers one extended resource on a UNIX socket in
// kubelet's device plugin directory, registers it with kubelet, and serves
// and registers again when kubelet restarts; a Manager runs one Server per
// wanted resource.
//
// The agent offers, per FastPathNetwork with datapath Macvtap, the resource
// macvtap.fastpath.io/<lower device> (MacvtapResource): its device IDs are
// "tap<N>", and Allocate hands the container /dev/tap<N>. The operator
// names the resource in the network's NetworkAttachmentDefinition, KubeVirt
// requests one per macvtap interface for virt-launcher's compute container,
// Multus passes the allocated ID to the CNI plugin as "deviceID", and the
// plugin creates the pod's macvtap with interface index N, whose character
// device the kernel names /dev/tap<N>: the node kubelet put into the
// container. This is what kubevirt/macvtap-cni's device plugin does with
// macvtaps it pre-creates in the host namespace; here the index is fixed in
// advance instead, so the CNI plugin can create the macvtap directly in the
// pod's namespace.
//
// With the vhost-user vsock backend (vsock mode Sibling) the agent also
// offers vsock.fastpath.io/sibling (SiblingMounts): each device is a host
// directory mounted at /var/run/fastpath/vsock in virt-launcher's compute
// container, into which PreStartContainer hard-links the one vhost-user
// socket of that pod's VM, after checking through kubelet's PodResources
// API and the VMI's status.activePods whose container it is
// (docs/vsock-sibling.md).
//
// Both resources are only for launchers of VMs the operator wired for them
// (issue 39): kubelet's Allocate names device IDs, never the pod, so the
// check runs where the pod is known, in PreStartContainer (and, for the
// sibling sockets, in every Sync): the pod holding the device (kubelet's
// PodResources API), its VMI's status.activePods, the VMI's VirtualMachine,
// the VM's wiring record (internal/vm/wiring) and the status of the
// FastPathAttachment it names (verifyLauncher). MacvtapLaunchers makes a
// macvtap resource that fails the container's start otherwise.
package deviceplugin
