package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/bridge"
	"github.com/fastpath-io/fastpath/internal/cniinstall"
	"github.com/fastpath-io/fastpath/internal/probe"
	"github.com/fastpath-io/fastpath/internal/relay"
)

// Periods of time-based requeues (everything else is driven by watches).
const (
	// DefaultResyncPeriod re-probes the node and re-checks its bridges (an
	// admin may load a module or delete a bridge; neither is watchable
	// through the apiserver).
	DefaultResyncPeriod = time.Minute
	// DefaultRetryPeriod retries sooner while a bridge, the relay or the CNI
	// install failed.
	DefaultRetryPeriod = 10 * time.Second
)

// BridgeManager ensures node bridges; *bridge.Manager is the real one.
type BridgeManager interface {
	// Ensure makes the bridge exist, up, with spec.MTU, and returns its state.
	Ensure(ctx context.Context, spec bridge.Spec) (bridge.State, error)
	// Managed lists the bridges the agent created (carrying its marker).
	Managed(ctx context.Context) ([]bridge.State, error)
}

// RelayProgrammer is the vsock sibling relay; *relay.Relay is the real one.
type RelayProgrammer interface {
	// Update makes the relay serve exactly routes.
	Update(routes []relay.Route) error
	// Listeners returns the open listeners.
	Listeners() []relay.ListenerStatus
}

// SysctlTuner checks (and, when enabled, raises) the node's sysctls;
// *sysctl.Tuner is the real one.
type SysctlTuner interface {
	Ensure() ([]fastpathv1alpha1.SysctlStatus, error)
}

// CNIInstaller installs the CNI binary; *cniinstall.Installer is the real one.
type CNIInstaller interface {
	Ensure() (cniinstall.Result, error)
}

// Reconciler prepares one node and publishes its FastPathNode. Required
// fields: Client, NodeName, Prober, Bridges, Relay.
type Reconciler struct {
	// Client reads FastPathAttachments and writes the FastPathNode.
	Client client.Client
	// APIReader reads the Node object (uncached, once per FastPathNode
	// creation) to make it the FastPathNode's owner, so the FastPathNode is
	// garbage-collected with its node. Nil skips the owner reference.
	APIReader client.Reader
	// NodeName is this node's name and the FastPathNode's.
	NodeName string
	// Prober reports the node's capabilities.
	Prober probe.Prober
	// Bridges ensures the bridges.
	Bridges BridgeManager
	// Relay is the vsock sibling relay.
	Relay RelayProgrammer
	// RelayEmulated is true when the relay runs over the UNIX-socket
	// emulation of vsock (tests and the demo): /dev/vhost-vsock is then not
	// needed, and status messages say the transport is emulated.
	RelayEmulated bool
	// Sysctls, when set, is run on every reconcile.
	Sysctls SysctlTuner
	// CNI, when set, is run on every reconcile.
	CNI CNIInstaller
	// AgentVersion is written to status.agentVersion.
	AgentVersion string
	// ResyncPeriod and RetryPeriod override DefaultResyncPeriod and
	// DefaultRetryPeriod when positive.
	ResyncPeriod, RetryPeriod time.Duration
}

// observed is what one reconcile found and did; the status is computed from it.
type observed struct {
	caps       fastpathv1alpha1.NodeCapabilities
	desired    []DesiredBridge
	conflicts  []BridgeConflict
	bridges    []fastpathv1alpha1.BridgeStatus
	bridgeErrs []error // Ensure errors of desired bridges
	routes     []relay.Route
	routeProbs []string
	relayErr   error
	listeners  []fastpathv1alpha1.RelayListenerStatus
	sysctls    []fastpathv1alpha1.SysctlStatus
	sysctlErr  error
	cni        string
	cniErr     error
}

// retry reports whether something failed that a retry may fix.
func (o *observed) retry() bool {
	return len(o.bridgeErrs) > 0 || o.relayErr != nil || o.cniErr != nil || o.sysctlErr != nil
}

// Reconcile runs the phases and publishes the FastPathNode. Failures of a
// phase land in the status (and cause a sooner retry); only apiserver
// failures are returned as errors.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != r.NodeName {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	var list fastpathv1alpha1.FastPathAttachmentList
	if err := r.Client.List(ctx, &list); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list FastPathAttachments: %w", err)
	}
	obs := &observed{}
	for _, phase := range []func(context.Context, *observed, []fastpathv1alpha1.FastPathAttachment){
		r.ensureBridges, r.programRelay, r.installCNI, r.tuneSysctls, r.probe,
	} {
		phase(ctx, obs, list.Items)
	}
	if err := r.publish(ctx, obs); err != nil {
		return ctrl.Result{}, err
	}
	if obs.retry() {
		log.V(1).Info("Node not ready yet, retrying", "after", r.period(r.RetryPeriod, DefaultRetryPeriod))
		return ctrl.Result{RequeueAfter: r.period(r.RetryPeriod, DefaultRetryPeriod)}, nil
	}
	return ctrl.Result{RequeueAfter: r.period(r.ResyncPeriod, DefaultResyncPeriod)}, nil
}

func (r *Reconciler) period(p, def time.Duration) time.Duration {
	if p > 0 {
		return p
	}
	return def
}

func (r *Reconciler) probe(ctx context.Context, obs *observed, _ []fastpathv1alpha1.FastPathAttachment) {
	obs.caps = r.Prober.Probe(ctx)
}

func (r *Reconciler) installCNI(ctx context.Context, obs *observed, _ []fastpathv1alpha1.FastPathAttachment) {
	if r.CNI == nil {
		return
	}
	res, err := r.CNI.Ensure()
	if err != nil {
		obs.cniErr = err
		ctrl.LoggerFrom(ctx).Error(err, "Failed to install the CNI binary")
		return
	}
	obs.cni = res.String()
}

func (r *Reconciler) tuneSysctls(ctx context.Context, obs *observed, _ []fastpathv1alpha1.FastPathAttachment) {
	if r.Sysctls == nil {
		return
	}
	obs.sysctls, obs.sysctlErr = r.Sysctls.Ensure()
	if obs.sysctlErr != nil {
		ctrl.LoggerFrom(ctx).Error(obs.sysctlErr, "Failed to tune sysctls")
	}
}

// programRelay feeds the relay this node's routes and reads back its listeners.
func (r *Reconciler) programRelay(ctx context.Context, obs *observed, atts []fastpathv1alpha1.FastPathAttachment) {
	obs.routes, obs.routeProbs = RelayRoutes(atts, r.NodeName)
	if err := r.Relay.Update(obs.routes); err != nil {
		obs.relayErr = err
		ctrl.LoggerFrom(ctx).Error(err, "Failed to program the vsock relay")
	}
	for _, l := range r.Relay.Listeners() {
		ls := fastpathv1alpha1.RelayListenerStatus{
			Port:       int64(l.Port),
			Attachment: l.Attachment.String(),
			Service:    l.Service,
			TargetCID:  int64(l.TargetCID),
			TargetPort: int64(l.TargetPort),
		}
		for _, c := range l.AllowedCIDs {
			ls.AllowedCIDs = append(ls.AllowedCIDs, int64(c))
		}
		obs.listeners = append(obs.listeners, ls)
	}
}

// ensureBridges ensures every desired bridge and describes each wanted,
// conflicting and no-longer-wanted bridge.
func (r *Reconciler) ensureBridges(ctx context.Context, obs *observed, atts []fastpathv1alpha1.FastPathAttachment) {
	log := ctrl.LoggerFrom(ctx)
	obs.desired, obs.conflicts = DesiredBridges(atts)
	listed := map[string]bool{}
	for _, d := range obs.desired {
		spec := bridge.Spec{Name: d.Name, Datapath: d.Datapath, MTU: int(d.MTU)}
		st, err := r.Bridges.Ensure(ctx, spec)
		bs := fastpathv1alpha1.BridgeStatus{
			Name: d.Name, Datapath: d.Datapath, MTU: int32(st.MTU),
			Ready: err == nil && st.Ready(spec), Attachments: d.Attachments, Message: st.Message,
		}
		switch {
		case err != nil:
			bs.Message = err.Error()
			obs.bridgeErrs = append(obs.bridgeErrs, err)
			log.Error(err, "Failed to ensure bridge", "bridge", d.Name, "datapath", d.Datapath)
		case !bs.Ready:
			err := fmt.Errorf("bridge %s is not ready: exists %t, up %t, MTU %d (want %d)", d.Name, st.Exists, st.Up, st.MTU, d.MTU)
			bs.Message = err.Error()
			obs.bridgeErrs = append(obs.bridgeErrs, err)
		}
		obs.bridges = append(obs.bridges, bs)
		listed[d.Name] = true
	}
	for _, c := range obs.conflicts {
		obs.bridges = append(obs.bridges, fastpathv1alpha1.BridgeStatus{Name: c.Name, Attachments: c.Attachments(), Message: c.Message()})
		listed[c.Name] = true
		log.Info("Bridge wanted with different datapaths; left unchanged", "bridge", c.Name, "attachments", c.Attachments())
	}
	managed, err := r.Bridges.Managed(ctx)
	if err != nil && !(errors.Is(err, bridge.ErrOVSUnreachable) && !wantsOVS(obs.desired)) {
		log.Error(err, "Failed to list the agent's bridges")
	}
	for _, m := range managed {
		if listed[m.Name] {
			continue
		}
		listed[m.Name] = true
		obs.bridges = append(obs.bridges, fastpathv1alpha1.BridgeStatus{
			Name: m.Name, Datapath: m.Datapath, MTU: int32(m.MTU), Ready: m.Exists && m.Up,
			Message: fmt.Sprintf("no FastPathAttachment wants this bridge any more; left in place with %d ports (delete it by hand once it is idle)", len(m.Ports)),
		})
	}
}

func wantsOVS(ds []DesiredBridge) bool {
	for _, d := range ds {
		if d.Datapath == fastpathv1alpha1.DatapathOVS {
			return true
		}
	}
	return false
}

// publish creates the FastPathNode when it is missing and patches its status
// when it differs from what obs yields.
func (r *Reconciler) publish(ctx context.Context, obs *observed) error {
	fpn := &fastpathv1alpha1.FastPathNode{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: r.NodeName}, fpn)
	if apierrors.IsNotFound(err) {
		fpn, err = r.create(ctx)
	}
	if err != nil {
		return fmt.Errorf("failed to get FastPathNode %s: %w", r.NodeName, err)
	}
	status := r.computeStatus(fpn, obs)
	if equality.Semantic.DeepEqual(fpn.Status, status) {
		return nil
	}
	patch := client.MergeFrom(fpn.DeepCopy())
	fpn.Status = status
	if err := r.Client.Status().Patch(ctx, fpn, patch); err != nil {
		return fmt.Errorf("failed to patch status of FastPathNode %s: %w", r.NodeName, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Updated FastPathNode status")
	return nil
}

// create creates the FastPathNode, owned by the Node when APIReader finds it
// (RBAC: get on nodes).
// A FastPathNode created concurrently (an older agent still running) is read
// instead.
func (r *Reconciler) create(ctx context.Context) (*fastpathv1alpha1.FastPathNode, error) {
	fpn := &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: r.NodeName}}
	if r.APIReader != nil {
		node := &corev1.Node{}
		switch err := r.APIReader.Get(ctx, types.NamespacedName{Name: r.NodeName}, node); {
		case err == nil:
			fpn.OwnerReferences = []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}}
		case !apierrors.IsNotFound(err):
			// Not fatal (e.g. RBAC without get on nodes): the FastPathNode
			// then outlives its node until deleted by hand.
			ctrl.LoggerFrom(ctx).Error(err, "Failed to get the Node to own the FastPathNode; creating it without an owner")
		}
	}
	err := r.Client.Create(ctx, fpn)
	if apierrors.IsAlreadyExists(err) {
		// The cache may not have it yet: read from the apiserver when we can.
		var reader client.Reader = r.Client
		if r.APIReader != nil {
			reader = r.APIReader
		}
		err = reader.Get(ctx, types.NamespacedName{Name: r.NodeName}, fpn)
	} else if err == nil {
		ctrl.LoggerFrom(ctx).Info("Created FastPathNode", "fastPathNode", r.NodeName)
	}
	return fpn, err
}
