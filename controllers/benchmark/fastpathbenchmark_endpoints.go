package benchmark

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// maxReasons bounds how many waiting endpoints a Pending message lists.
const maxReasons = 3

// reconcileEndpoints finds every server address (and in VM mode every client
// address and the SSH key), creating the netserver pods in Pod mode. Missing
// ones keep the benchmark Pending with the reason and what is missing.
func (r *Reconciler) reconcileEndpoints(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job != nil {
		return ctrl.Result{}, nil
	}
	var (
		waiting []string
		res     ctrl.Result
		err     error
	)
	reason := fastpathv1alpha1.ReasonEndpointNotFound
	if s.spec.Mode == fastpathv1alpha1.BenchmarkModePod {
		waiting, err = r.podEndpoints(ctx, s)
	} else {
		waiting, err = r.vmEndpoints(ctx, s)
		if err == nil && len(waiting) == 0 {
			reason, waiting, err = r.sshKey(ctx, s)
			if len(waiting) > 0 {
				res.RequeueAfter = r.sshKeyRetry()
			}
		}
	}
	if err != nil || s.stop {
		return ctrl.Result{}, err
	}
	if len(waiting) > 0 {
		if len(waiting) > maxReasons {
			waiting = append(waiting[:maxReasons], fmt.Sprintf("and %d more", len(waiting)-maxReasons))
		}
		setPending(s.bench, reason, "Waiting for endpoints: "+strings.Join(waiting, "; "))
		s.stop = true
	}
	return res, nil
}

func (r *Reconciler) sshKeyRetry() time.Duration {
	if r.SSHKeyRetry > 0 {
		return r.SSHKeyRetry
	}
	return DefaultSSHKeyRetry
}

// podEndpoints ensures the netserver pods and reads their addresses. A failed
// netserver pod fails the benchmark (NetserverUnreachable).
func (r *Reconciler) podEndpoints(ctx context.Context, s *scope) ([]string, error) {
	want, err := benchjob.ServerPods(s.params)
	if err != nil { // reconcileSpec has rejected such specs already
		return nil, fmt.Errorf("failed to render the netserver pods of FastPathBenchmark %s: %w", klog.KObj(s.bench), err)
	}
	var waiting []string
	s.endpoints = benchjob.Endpoints{}
	for _, pod := range want {
		if err := controllerutil.SetControllerReference(s.bench, pod, r.Client.Scheme()); err != nil {
			return nil, fmt.Errorf("failed to own Pod %s: %w", klog.KObj(pod), err)
		}
		got := &corev1.Pod{}
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)
		switch {
		case apierrors.IsNotFound(err):
			if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("failed to create netserver Pod %s: %w", klog.KObj(pod), err)
			}
			log.FromContext(ctx).Info("Created netserver pod", "pod", klog.KObj(pod))
			waiting = append(waiting, fmt.Sprintf("pod %s created", pod.Name))
			continue
		case err != nil:
			return nil, fmt.Errorf("failed to get netserver Pod %s: %w", klog.KObj(pod), err)
		case !got.DeletionTimestamp.IsZero() || got.Labels[benchjob.LabelGeneration] != pod.Labels[benchjob.LabelGeneration]:
			waiting = append(waiting, fmt.Sprintf("pod %s of an earlier run is terminating", got.Name))
			continue
		case got.Status.Phase == corev1.PodFailed || got.Status.Phase == corev1.PodSucceeded:
			setFailed(s.bench, fastpathv1alpha1.ReasonNetserverUnreachable, fmt.Sprintf("netserver pod %s ended (phase %s): %s", got.Name, got.Status.Phase, got.Status.Message))
			s.stop = true
			return nil, nil
		}
		path := got.Labels[benchjob.LabelPath]
		addr, why := benchjob.ServerAddress(got, path, s.params.NetworkAttachment)
		if addr == "" {
			waiting = append(waiting, why)
			continue
		}
		if path == benchjob.PathFastPath {
			s.endpoints.FastPath = append(s.endpoints.FastPath, addr)
		} else {
			s.endpoints.Baseline = append(s.endpoints.Baseline, addr)
		}
	}
	return waiting, nil
}

// vmEndpoints reads the server VMs' fast-path and pod-network addresses and the
// client VMs' pod-network addresses from their VMIs. Each VM must be selected
// by the attachment (status.vms).
func (r *Reconciler) vmEndpoints(ctx context.Context, s *scope) ([]string, error) {
	selected := map[string]bool{}
	for _, vm := range s.attachment.Status.VMs {
		selected[vm.Name] = true
	}
	network := fastpathv1alpha1.NetworkName(s.attachment.Name)
	ip, vs := benchjob.HasIPTests(s.spec), benchjob.HasVSockTests(s.spec)
	baseline := ip && s.spec.Baseline != fastpathv1alpha1.BaselineNone
	var waiting []string
	s.endpoints = benchjob.Endpoints{}
	hostCPU := &hostCPULaunchers{}
	if vs {
		s.endpoints.VSock = &benchjob.RunnerVSock{}
		// reconcileSpec allows one pair with vsock tests: its server VM.
		server := s.spec.Server.VM
		i := slices.IndexFunc(s.attachment.Status.VSOCKServices, func(v fastpathv1alpha1.VSOCKServiceStatus) bool {
			_, _, ok := v.Dial()
			return v.VM == server && ok
		})
		if i < 0 {
			waiting = append(waiting, fmt.Sprintf("no vsock service of FastPathAttachment %s with a relay port or a sibling CID targets the server VM %s (add one to its spec.vsock.services)", s.attachment.Name, server))
		} else {
			svc := s.attachment.Status.VSOCKServices[i]
			v := s.endpoints.VSock
			v.ServicePort = svc.Port
			// Mode Sibling: the server's CID in the vhost-user group; mode
			// Relay: the host at the relay port.
			v.CID, v.Port, _ = svc.Dial()
		}
	}
	for i, p := range vmPairs(s.spec)[:benchjob.MaxPairs(s.spec)] {
		nodes := map[string]string{} // VM -> its VMI's node
		for _, side := range []struct {
			vm     string
			server bool
		}{{p.Client, false}, {p.Server, true}} {
			role := fmt.Sprintf("client of pair %d", i+1)
			if side.server {
				role = fmt.Sprintf("server of pair %d", i+1)
			}
			if !selected[side.vm] {
				waiting = append(waiting, fmt.Sprintf("VM %s (%s) is not selected by FastPathAttachment %s", side.vm, role, s.attachment.Name))
				continue
			}
			vmi := &kubevirtv1.VirtualMachineInstance{}
			if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.bench.Namespace, Name: side.vm}, vmi); err != nil {
				if apierrors.IsNotFound(err) {
					waiting = append(waiting, fmt.Sprintf("VM %s (%s) has no VirtualMachineInstance: it is not running", side.vm, role))
					continue
				}
				return nil, fmt.Errorf("failed to get VirtualMachineInstance %s/%s: %w", s.bench.Namespace, side.vm, err)
			}
			if vmi.Status.NodeName != "" {
				nodes[side.vm] = vmi.Status.NodeName
			}
			if why, err := r.addLauncher(ctx, hostCPU, vmi, i, side.server); err != nil {
				return nil, err
			} else if why != "" {
				waiting = append(waiting, why)
			}
			fast, pod := benchjob.VMIAddresses(vmi, network)
			if _, masq := benchjob.MasqueradePodAddress(vmi, nil); masq {
				launcher, err := r.activeLauncher(ctx, vmi)
				if err != nil {
					return nil, err
				}
				// The launcher's pod IP when it is known; else what the VMI
				// reports (a launcher that no kubelet runs: the local
				// emulation's).
				if addr, _ := benchjob.MasqueradePodAddress(vmi, launcher); addr != "" {
					pod = addr
				}
			}
			if ip && side.server && fast == "" {
				waiting = append(waiting, fmt.Sprintf("VMI %s (%s) reports no address on interface %s", side.vm, role, network))
			}
			if (!side.server || baseline || vs) && pod == "" {
				waiting = append(waiting, fmt.Sprintf("VMI %s (%s) reports no pod-network address (interface %s)", side.vm, role, benchjob.PodNetworkInterface))
			}
			switch {
			case !side.server:
				s.endpoints.SSHClients = append(s.endpoints.SSHClients, pod)
			default:
				if ip {
					s.endpoints.FastPath = append(s.endpoints.FastPath, fast)
				}
				if baseline {
					s.endpoints.Baseline = append(s.endpoints.Baseline, pod)
				}
				if vs {
					s.endpoints.VSock.Servers = append(s.endpoints.VSock.Servers, pod)
				}
			}
		}
		if c, srv := nodes[p.Client], nodes[p.Server]; c != "" && srv != "" && c != srv {
			setFailed(s.bench, fastpathv1alpha1.ReasonVMsApart, fmt.Sprintf(
				"pair %d: client VM %s runs on node %s and server VM %s on node %s: the fast path joins only VMs on one node, so there is nothing to measure "+
					"(FastPathAttachment %s: placement Required co-locates its VMs; see its Colocated condition)",
				i+1, p.Client, c, p.Server, srv, s.attachment.Name))
			s.stop = true
			return nil, nil
		}
	}
	if len(waiting) == 0 && r.AgentHostCPUPort > 0 {
		s.endpoints.HostCPU = hostCPU.runnerHostCPU(ctx, r.AgentHostCPUPort, benchjob.MaxPairs(s.spec))
	}
	return waiting, nil
}

// hostCPULaunchers collects the virt-launcher pods of a VM-mode run: per
// pair the client's and the server's, and the node address each runs on.
type hostCPULaunchers struct {
	launchers [][2]string
	hostIPs   map[string]bool
	missing   []string
}

// addLauncher records the launcher pod of vmi (pair i, the server's when
// server): the pod status.activePods places on the VMI's node (written by
// virt-controller only), found among the pods KubeVirt labels as created by
// the VMI, and its node's address. A VMI without such an active pod has no
// launcher to read (the run measures no host CPU); one whose active pod is
// not yet in the cache, running with a host IP, is waited for (why).
func (r *Reconciler) addLauncher(ctx context.Context, h *hostCPULaunchers, vmi *kubevirtv1.VirtualMachineInstance, i int, server bool) (why string, err error) {
	if r.AgentHostCPUPort <= 0 {
		return "", nil
	}
	for len(h.launchers) <= i {
		h.launchers = append(h.launchers, [2]string{})
	}
	uid := activePod(vmi)
	if uid == "" {
		h.missing = append(h.missing, vmi.Name)
		return "", nil
	}
	p, err := r.activeLauncher(ctx, vmi)
	if err != nil {
		return "", err
	}
	if p == nil || p.Status.HostIP == "" {
		return fmt.Sprintf("virt-launcher pod %s of VMI %s is not running with a host IP yet", uid, vmi.Name), nil
	}
	h.launchers[i][boolIndex(server)] = string(p.UID)
	if h.hostIPs == nil {
		h.hostIPs = map[string]bool{}
	}
	h.hostIPs[p.Status.HostIP] = true
	return "", nil
}

// activePod returns the UID of the pod vmi's status.activePods (written by
// virt-controller only) places on the VMI's node, or "".
func activePod(vmi *kubevirtv1.VirtualMachineInstance) types.UID {
	var uid types.UID
	for u, node := range vmi.Status.ActivePods {
		if node == vmi.Status.NodeName && node != "" {
			uid = u
		}
	}
	return uid
}

// activeLauncher returns vmi's running virt-launcher pod: the activePod,
// found among the pods KubeVirt labels as created by the VMI, on the VMI's
// node; nil when there is none (yet).
func (r *Reconciler) activeLauncher(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	uid := activePod(vmi)
	if uid == "" {
		return nil, nil
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		return nil, fmt.Errorf("failed to list the virt-launcher pods of VMI %s: %w", klog.KObj(vmi), err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.UID == uid && p.Spec.NodeName == vmi.Status.NodeName && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, nil
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// runnerHostCPU is the runner's host CPU contract, or nil (logged) when a
// launcher was not found or the launchers are on more than one node.
func (h *hostCPULaunchers) runnerHostCPU(ctx context.Context, port int32, pairs int) *benchjob.RunnerHostCPU {
	log := ctrl.LoggerFrom(ctx)
	switch {
	case len(h.missing) > 0:
		log.Info("No host CPU for this run: running virt-launcher pod not found", "vms", h.missing)
		return nil
	case len(h.hostIPs) != 1 || len(h.launchers) < pairs:
		log.Info("No host CPU for this run: the launchers are not on one node", "hostIPs", len(h.hostIPs))
		return nil
	}
	var ip string
	for a := range h.hostIPs {
		ip = a
	}
	return &benchjob.RunnerHostCPU{Agent: net.JoinHostPort(ip, strconv.Itoa(int(port))), Launchers: h.launchers[:pairs]}
}

// sshKey checks (uncached) that the Secret of spec.sshKeySecretRef exists with
// key ssh-privatekey, when the operator may read it: the chart grants no
// cluster-wide Secret read, so by default the kubelet reports a missing
// Secret in the runner Pod's events instead.
func (r *Reconciler) sshKey(ctx context.Context, s *scope) (string, []string, error) {
	ref := s.spec.SSHKeySecretRef
	if ref == nil { // the CRD requires it in VM mode
		return fastpathv1alpha1.ReasonSSHKeyMissing, []string{"spec.sshKeySecretRef is not set"}, nil
	}
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.bench.Namespace, Name: ref.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return fastpathv1alpha1.ReasonSSHKeyMissing, []string{fmt.Sprintf("Secret %s (spec.sshKeySecretRef) not found", ref.Name)}, nil
		}
		if apierrors.IsForbidden(err) {
			// The operator has no cluster-wide read on Secrets (issue 17):
			// a missing Secret or key then shows as the runner Pod's
			// FailedMount event, from the kubelet.
			ctrl.LoggerFrom(ctx).V(1).Info("Not allowed to read the SSH key Secret; leaving the check to the kubelet", "secret", ref.Name)
			return "", nil, nil
		}
		return "", nil, fmt.Errorf("failed to get Secret %s/%s: %w", s.bench.Namespace, ref.Name, err)
	}
	if len(sec.Data[benchjob.SSHKeyFile]) == 0 {
		return fastpathv1alpha1.ReasonSSHKeyMissing, []string{fmt.Sprintf("Secret %s has no key %s", ref.Name, benchjob.SSHKeyFile)}, nil
	}
	return "", nil, nil
}
