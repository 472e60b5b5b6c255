package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Defaults of SiblingMounts.
const (
	// DefaultSiblingDevices is how many containers of one node can hold
	// v1alpha1.SiblingResourceName at once: one per running Sibling VM (two
	// while one migrates within the node). kubelet's default pod limit is 110.
	DefaultSiblingDevices = 128
	// MaxSiblingDevices bounds --sibling-devices: every device is a
	// directory under <socket dir>/alloc.
	MaxSiblingDevices = 4096
	// DefaultSiblingResyncInterval is how often SiblingMounts re-checks
	// every device in Start: a link to a socket the backend recreated (a new inode)
	// is replaced, a device no pod holds any more is emptied.
	DefaultSiblingResyncInterval = 2 * time.Second
	// SiblingUndecidedMaxBackoff caps the wait between verifications of a
	// pod that cannot be decided yet (see verify): Sync retries it after
	// twice the resync interval, then twice that, up to this.
	SiblingUndecidedMaxBackoff = time.Minute
	// SiblingUndecidedDeadline is how long Sync keeps verifying such a pod
	// before it gives up on it (the directory stays empty, with a Warning
	// event); kubelet's PreStartContainer still verifies afresh. virt-controller
	// lists a launcher in status.activePods within seconds of creating it,
	// so ten minutes is far past any real launcher and bounds what a stuck
	// or forged pod costs the API server: a dozen reads, not one every 2 s.
	SiblingUndecidedDeadline = 10 * time.Minute
	// DefaultPodResourcesSocket is kubelet's PodResources API socket
	// (k8s.io/kubelet podresources v1; kubelet --pod-resources-socket
	// default under its root directory /var/lib/kubelet).
	DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	// podResourcesTimeout bounds one List call and the API reads of one
	// verification, well inside kubelet's 30 s PreStartContainer timeout.
	podResourcesTimeout = 10 * time.Second
	// siblingDevicePrefix prefixes the device IDs ("vsock0", "vsock1", ...).
	siblingDevicePrefix = "vsock"
	// vmiKind is the kind of the controller of a virt-launcher pod.
	vmiKind = "VirtualMachineInstance"
)

// Event reasons of SiblingMounts, on the pod holding the device.
const (
	// EventSiblingSocketLinked: the VM's vhost-user socket is in the pod's
	// allocation directory.
	EventSiblingSocketLinked = "SiblingSocketLinked"
	// EventSiblingSocketNotLinked: the pod holds the device but gets no
	// socket (yet); the message says why.
	EventSiblingSocketNotLinked = "SiblingSocketNotLinked"
)

// SiblingDeviceIDs returns the n device IDs of v1alpha1.SiblingResourceName:
// "vsock0" to "vsock<n-1>". They never look like the macvtap resources'
// "tap<N>", so Manager.Sync never sees them overlap.
func SiblingDeviceIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = siblingDevicePrefix + strconv.Itoa(i)
	}
	return ids
}

// PodResourcesLister lists the resources kubelet assigned to the pods of
// this node; KubeletPodResources is the real one.
type PodResourcesLister interface {
	List(ctx context.Context) ([]*podresourcesapi.PodResources, error)
}

// KubeletPodResources is kubelet's PodResources API v1 (List) on the UNIX
// socket Socket (DefaultPodResourcesSocket on a node).
type KubeletPodResources struct {
	Socket string
}

// List calls PodResourcesLister.List once. Errors name the socket.
func (k KubeletPodResources) List(ctx context.Context) ([]*podresourcesapi.PodResources, error) {
	conn, err := grpc.NewClient("unix://"+k.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("failed to reach kubelet's PodResources API at %s: %w", k.Socket, err)
	}
	defer conn.Close()
	resp, err := podresourcesapi.NewPodResourcesListerClient(conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("failed to list pod resources from kubelet at %s: %w", k.Socket, err)
	}
	return resp.PodResources, nil
}

// SiblingMounts serves v1alpha1.SiblingResourceName: it brings ONE VM's
// vhost-user-vsock socket into that VM's virt-launcher compute container
// and nothing else.
//
// Each device ID has a host directory <SocketDir>/alloc/<ID>. Allocate
// replaces it by a new, empty directory and mounts it read-write at
// ContainerDir (where the domain hook points QEMU). PreStartContainer
// (kubelet calls it with the container's device IDs after Allocate, before
// the container starts) asks kubelet's PodResources API which pod holds the
// device, checks through the API server that the pod is the virt-launcher
// pod of a VirtualMachineInstance in vsock mode Sibling on this node whose
// VirtualMachine a FastPathAttachment wired for this resource (see
// verify), and hard-links that VM's <SocketDir>/<h>.vhost
// (v1alpha1.SiblingSocketPath) into the directory; any other pod gets the
// empty directory. The hybrid-vsock host socket <h>.vsock and the other
// VMs' sockets are never linked: the container sees one socket.
//
// A hard link is the socket itself (connect(2) finds the listener by the
// inode), but it goes stale when the backend recreates the socket; Start
// re-links every Sync interval, and empties the directories of devices no
// pod holds. The socket is made mode 0666 (QEMU runs as KubeVirt's non-root
// user 107) and SocketDir 0700, so on the host only root reaches it.
//
// Fill in the exported fields and call Resource, then Start. Its methods are
// safe for concurrent use.
type SiblingMounts struct {
	// SocketDir is the host directory of the vhost-user sockets (the
	// agent's --sibling-socket-dir); "" is v1alpha1.SiblingSocketDir.
	SocketDir string
	// BackendDir is where the backend binds the sockets, SocketDir or a
	// directory below it on the same file system (a hard link cannot cross
	// one): the backend pod's own directory (fastpath-agent
	// --sibling-backend-socket); "" is SocketDir. A socket there that this
	// process does not own is linked only with CAP_FOWNER
	// (fs.protected_hardlinks), and must already be mode 0666 (the backend's
	// umask), as only its owner may chmod it.
	BackendDir string
	// ContainerDir is where the compute container sees its directory (the
	// hook's $FASTPATH_SIBLING_SOCKET_DIR); "" is v1alpha1.SiblingSocketDir.
	ContainerDir string
	// NodeName is this node: only pods and VMI entries on it qualify.
	NodeName string
	// Devices is the number of device IDs, 1 to MaxSiblingDevices; 0 is
	// DefaultSiblingDevices.
	Devices int
	// PodResources finds the pod that holds a device.
	PodResources PodResourcesLister
	// Reader reads Pods, VirtualMachineInstances, VirtualMachines (their
	// metadata) and FastPathAttachments (uncached: the API reader, so the
	// agent keeps no cache of every pod).
	Reader client.Reader
	// Recorder, when set, gets an event on the pod when its link is made or
	// cannot be made (on transitions only), and EventSiblingBackendReplaced.
	Recorder record.EventRecorder
	// ServedSince, when set, tells when the process serving a socket
	// started: a link replaced under a running QEMU then gets
	// EventSiblingBackendReplaced.
	ServedSince ServedSinceFunc
	// ResyncInterval overrides DefaultSiblingResyncInterval.
	ResyncInterval time.Duration
	// Clock times the back-off of undecided pods; nil is the real clock.
	Clock clock.PassiveClock
	// Log receives the lines.
	Log logr.Logger

	mu   sync.Mutex
	held map[string]holding // by device ID, what the last check found
}

// holding is what SiblingMounts knows about one allocated device.
type holding struct {
	pod types.NamespacedName
	// decided: the pod was verified (vm set) or found not to be a Sibling
	// launcher (vm ""); not decided: verification must run again.
	decided bool
	vm      string
	// message is the last reported outcome, so events go out on changes only.
	message string
	// Undecided: err is the last verification's error, tries how many
	// failed since undecidedSince, and Sync verifies again at retryAt.
	err            error
	tries          int
	undecidedSince time.Time
	retryAt        time.Time
}

// Resource returns the device plugin resource: v1alpha1.SiblingResourceName
// with SiblingDeviceIDs(Devices), Allocate and PreStart of m. Errors: Devices
// out of range.
func (m *SiblingMounts) Resource() (Resource, error) {
	n := m.devices()
	if n < 1 || n > MaxSiblingDevices {
		return Resource{}, fmt.Errorf("sibling devices %d out of range: must be 1-%d", n, MaxSiblingDevices)
	}
	return Resource{Name: fastpathv1alpha1.SiblingResourceName, Devices: SiblingDeviceIDs(n), Allocate: m.allocate, PreStart: m.preStart}, nil
}

func (m *SiblingMounts) devices() int {
	if m.Devices == 0 {
		return DefaultSiblingDevices
	}
	return m.Devices
}

func (m *SiblingMounts) backendDir() string {
	if m.BackendDir == "" {
		return m.socketDir()
	}
	return m.BackendDir
}

func (m *SiblingMounts) socketDir() string {
	if m.SocketDir == "" {
		return fastpathv1alpha1.SiblingSocketDir
	}
	return m.SocketDir
}

func (m *SiblingMounts) containerDir() string {
	if m.ContainerDir == "" {
		return fastpathv1alpha1.SiblingSocketDir
	}
	return m.ContainerDir
}

// AllocDir returns the host directory of device id:
// <SocketDir>/alloc/<id>.
func (m *SiblingMounts) AllocDir(id string) string {
	return filepath.Join(m.socketDir(), fastpathv1alpha1.SiblingAllocDir, id)
}

// prepare makes SocketDir and its alloc directory exist with mode 0700.
func (m *SiblingMounts) prepare() error {
	for _, d := range []string{m.socketDir(), filepath.Join(m.socketDir(), fastpathv1alpha1.SiblingAllocDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("failed to create sibling socket directory %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("failed to restrict sibling socket directory %s to mode 0700: %w", d, err)
		}
	}
	return nil
}

// allocate gives the one container that gets device ids[0] a new empty
// directory. A new directory (not the old one emptied) means that a mount
// of the old one, should any container still hold it, never sees what is
// linked for the new holder.
func (m *SiblingMounts) allocate(ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	if len(ids) != 1 {
		return nil, fmt.Errorf("failed to allocate %s: a container takes exactly 1 device (resources.limits[%q]: \"1\"), not %d",
			fastpathv1alpha1.SiblingResourceName, fastpathv1alpha1.SiblingResourceName, len(ids))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.prepare(); err != nil {
		return nil, err
	}
	dir := m.AllocDir(ids[0])
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("failed to remove the old allocation directory %s of device %s: %w", dir, ids[0], err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create the allocation directory %s of device %s: %w", dir, ids[0], err)
	}
	// QEMU (user 107) must traverse it whatever the umask.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to set mode 0755 on the allocation directory %s: %w", dir, err)
	}
	delete(m.held, ids[0])
	return &pluginapi.ContainerAllocateResponse{Mounts: []*pluginapi.Mount{{ContainerPath: m.containerDir(), HostPath: dir}}}, nil
}

// preStart links the socket for the container that holds ids. It fails,
// leaving the directories empty, when it cannot tell whose container it
// is (PodResources or the API server unreachable, the pod not yet in its
// VMI's status.activePods) or when the pod is a Sibling launcher whose
// socket does not exist: kubelet reports the error on the pod and retries
// the start. A pod that is not a Sibling launcher gets its empty directory.
func (m *SiblingMounts) preStart(ctx context.Context, ids []string) error {
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	holders, err := m.holders(ctx)
	if err != nil {
		return fmt.Errorf("failed to find the pod holding %s devices %v: %w", fastpathv1alpha1.SiblingResourceName, ids, err)
	}
	for _, id := range ids {
		pod, ok := holders[id]
		if !ok {
			_ = m.empty(id)
			return fmt.Errorf("failed to prepare %s device %s: kubelet's PodResources API lists no pod holding it", fastpathv1alpha1.SiblingResourceName, id)
		}
		delete(m.held, id)
		if err := m.ensure(ctx, id, pod, true); err != nil {
			return err
		}
	}
	return nil
}

// Sync makes every device's directory match its holder now: the holder's
// socket (re-linked when the backend recreated it) for a verified Sibling
// launcher, empty for any other pod or when no pod holds it. An error of
// one device does not stop the others; a pod that cannot be verified now
// keeps what it has. It returns the PodResources error or the devices'
// errors joined.
func (m *SiblingMounts) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	holders, err := m.holders(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range SiblingDeviceIDs(m.devices()) {
		pod, ok := holders[id]
		if !ok {
			if h, was := m.held[id]; was {
				m.Log.Info("Sibling device released; emptying its directory", "device", id, "pod", h.pod.String())
			}
			delete(m.held, id)
			if err := m.empty(id); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := m.ensure(ctx, id, pod, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Start prepares the socket directory, then Syncs every ResyncInterval until
// ctx ends (a controller-runtime manager.Runnable). Sync errors are logged,
// not returned; an error preparing the directory is returned.
func (m *SiblingMounts) Start(ctx context.Context) error {
	m.mu.Lock()
	err := m.prepare()
	m.mu.Unlock()
	if err != nil {
		return err
	}
	t := time.NewTicker(m.resyncInterval())
	defer t.Stop()
	for {
		if err := m.Sync(ctx); err != nil && ctx.Err() == nil {
			m.Log.Error(err, "Failed to sync the sibling socket links")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (m *SiblingMounts) resyncInterval() time.Duration {
	if m.ResyncInterval <= 0 {
		return DefaultSiblingResyncInterval
	}
	return m.ResyncInterval
}

func (m *SiblingMounts) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}

// NeedLeaderElection: every node's agent runs its own.
func (m *SiblingMounts) NeedLeaderElection() bool { return false }

// holders returns, by device ID of the resource, the pod kubelet assigned it to.
func (m *SiblingMounts) holders(ctx context.Context) (map[string]types.NamespacedName, error) {
	return holdersOf(ctx, m.PodResources, fastpathv1alpha1.SiblingResourceName)
}

// ensure brings device id's directory to what pod should have. strict
// (PreStartContainer) verifies afresh and empties the directory on any
// error; otherwise a decided holder is not verified again and an undecided
// one keeps its directory as it is.
func (m *SiblingMounts) ensure(ctx context.Context, id string, pod types.NamespacedName, strict bool) error {
	if m.held == nil {
		m.held = map[string]holding{}
	}
	h, ok := m.held[id]
	now := m.now()
	if !strict && ok && h.pod == pod && !h.decided && now.Before(h.retryAt) {
		return h.err // backing off: no API reads until retryAt
	}
	if !ok || h.pod != pod || !h.decided {
		obj, vm, reason, err := m.verify(ctx, pod)
		otherPod := ok && h.pod != pod
		prev := h
		h = holding{pod: pod, message: h.message}
		if err != nil {
			err = fmt.Errorf("failed to link a vhost-user socket for pod %s (%s device %s): %w", pod, fastpathv1alpha1.SiblingResourceName, id, err)
			h.err, h.tries, h.undecidedSince = err, 1, now
			if ok && prev.pod == pod && !prev.decided {
				h.tries, h.undecidedSince = prev.tries+1, prev.undecidedSince
			}
			h.retryAt = now.Add(min(m.resyncInterval()<<h.tries, SiblingUndecidedMaxBackoff))
			if !strict && now.Sub(h.undecidedSince) >= SiblingUndecidedDeadline {
				h = holding{pod: pod, message: h.message, decided: true}
				m.report(&h, obj, corev1.EventTypeWarning, EventSiblingSocketNotLinked,
					fmt.Sprintf("no vhost-user socket: gave up after %s undecided (%d checks); kubelet's next start of the container checks again: %v", SiblingUndecidedDeadline, prev.tries+1, err))
				m.held[id] = h
				return m.empty(id)
			}
			m.report(&h, obj, corev1.EventTypeWarning, EventSiblingSocketNotLinked, err.Error())
			m.held[id] = h
			// Never leave one pod's link to another.
			if strict || otherPod {
				_ = m.empty(id)
			}
			return err
		}
		h.decided, h.vm = true, vm
		m.held[id] = h
		if vm == "" {
			m.Log.Info("Pod holding a sibling device is not a Sibling virt-launcher; its directory stays empty", "device", id, "pod", pod.String(), "reason", reason)
			m.report(&h, obj, corev1.EventTypeWarning, EventSiblingSocketNotLinked, "no vhost-user socket: "+reason)
			m.held[id] = h
			return m.empty(id)
		}
	}
	if h.vm == "" {
		return m.empty(id)
	}
	change, err := m.link(id, pod.Namespace, h.vm, strict)
	if err != nil {
		err = fmt.Errorf("failed to link the vhost-user socket of VM %s/%s for pod %s (%s device %s): %w", pod.Namespace, h.vm, pod, fastpathv1alpha1.SiblingResourceName, id, err)
		m.report(&h, podRef(pod), corev1.EventTypeWarning, EventSiblingSocketNotLinked, err.Error())
		m.held[id] = h
		_ = m.empty(id)
		return err
	}
	if change != linkUnchanged {
		m.Log.Info("Linked the vhost-user socket of a Sibling VM into its virt-launcher", "device", id, "pod", pod.String(), "vm", pod.Namespace+"/"+h.vm)
	}
	if change == linkReplaced && !strict {
		m.backendReplaced(ctx, pod, h.vm, id)
	}
	m.report(&h, podRef(pod), corev1.EventTypeNormal, EventSiblingSocketLinked,
		fmt.Sprintf("vhost-user socket of VM %s/%s linked into %s (device %s)", pod.Namespace, h.vm, m.containerDir(), id))
	m.held[id] = h
	return nil
}

// verify decides whether pod is the virt-launcher pod, on this node, of a
// VirtualMachineInstance in vsock mode Sibling whose VirtualMachine the
// operator wired for v1alpha1.SiblingResourceName, and returns the VM's
// name (whose socket it gets). vm "" with a
// reason: it is not, and never will be. err: it cannot be decided now (API
// errors; the pod not yet in the VMI's status.activePods, which
// virt-controller fills once the pod exists; the attachment's status not
// yet listing the VM as wired in mode Sibling).
//
// The proof is verifyLauncher's chain (pod, VMI status.activePods, VM,
// wiring record, attachment status) and wiredForSibling. Pod, VMI, VM and
// attachment share the namespace, so a pod can only ever get a socket of a
// VM of its own namespace.
func (m *SiblingMounts) verify(ctx context.Context, key types.NamespacedName) (obj *corev1.Pod, vm, reason string, err error) {
	w, obj, reason, err := verifyLauncher(ctx, m.Reader, m.NodeName, key)
	if err != nil || reason != "" {
		return obj, "", reason, err
	}
	if reason, err := w.wiredForSibling(); err != nil || reason != "" {
		return obj, "", reason, err
	}
	return obj, w.vm.Name, "", nil
}

// link hard-links the vhost-user socket of VM ns/vm into device id's
// directory (atomically replacing a stale link) and removes everything
// else there, and says what it changed. Outside
// PreStartContainer (strict false) a missing socket with a socket already
// linked keeps that link: vhost-device-vsock 0.3.0 unlinks a VM's socket
// once QEMU has connected and binds a new one when QEMU leaves, so the link
// in place is the socket the running QEMU holds. Errors: the socket missing
// (its group is not running here, or, at PreStartContainer, its QEMU has
// not left it yet) or not a socket, the directory missing, file system
// errors.
func (m *SiblingMounts) link(id, ns, vm string, strict bool) (change linkChange, err error) {
	name := filepath.Base(fastpathv1alpha1.SiblingSocketPath(ns, vm))
	src := filepath.Join(m.backendDir(), name)
	dir := m.AllocDir(id)
	if _, err := os.Stat(dir); err != nil {
		return linkUnchanged, fmt.Errorf("allocation directory %s: %w", dir, err)
	}
	st, err := os.Lstat(src)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !strict {
			if cur, lerr := os.Lstat(filepath.Join(dir, name)); lerr == nil && cur.Mode().Type() == os.ModeSocket {
				return linkUnchanged, removeAllBut(dir, name)
			}
		}
		if errors.Is(err, os.ErrNotExist) {
			return linkUnchanged, fmt.Errorf("socket %s does not exist: the VM's Sibling group does not run on node %s (FastPathNode status.siblingBackends)", src, m.NodeName)
		}
		return linkUnchanged, err
	}
	if st.Mode().Type() != os.ModeSocket {
		return linkUnchanged, fmt.Errorf("%s is not a socket (mode %s)", src, st.Mode())
	}
	// QEMU connects as KubeVirt's non-root user; the 0700 socket directory
	// keeps the host's other users out.
	if st.Mode().Perm() != 0o666 {
		if err := os.Chmod(src, 0o666); err != nil {
			return linkUnchanged, fmt.Errorf("failed to make socket %s connectable (mode 0666): %w", src, err)
		}
	}
	dst := filepath.Join(dir, name)
	if cur, err := os.Lstat(dst); err != nil || !os.SameFile(cur, st) {
		change = linkNew
		if err == nil && cur.Mode().Type() == os.ModeSocket {
			change = linkReplaced
		}
		tmp := filepath.Join(dir, "."+name+".new")
		_ = os.Remove(tmp)
		if err := os.Link(src, tmp); err != nil {
			return linkUnchanged, fmt.Errorf("failed to hard-link %s: %w", src, err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			_ = os.Remove(tmp)
			return linkUnchanged, fmt.Errorf("failed to put the link to %s in place: %w", src, err)
		}
	}
	return change, removeAllBut(dir, name)
}

// empty removes everything in device id's directory (a missing directory
// is empty); the directory itself stays, as a container may mount it.
func (m *SiblingMounts) empty(id string) error { return removeAllBut(m.AllocDir(id), "") }

// removeAllBut removes every entry of dir except keep.
func removeAllBut(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("failed to read allocation directory %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.Name() == keep {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("failed to empty allocation directory %s: %w", dir, err)
		}
	}
	return nil
}

// report records message in h and sends an event on obj when it differs
// from the last one.
func (m *SiblingMounts) report(h *holding, obj *corev1.Pod, eventType, reason, message string) {
	if h.message == message {
		return
	}
	h.message = message
	if m.Recorder != nil && obj != nil {
		m.Recorder.Event(obj, eventType, reason, message)
	}
}

// podRef is enough of a pod for an event.
func podRef(key types.NamespacedName) *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
}
