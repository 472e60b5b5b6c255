package relay

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// Route is one relayed service: guests whose CID is in AllowedCIDs dial the
// host (vsock.HostCID) on ListenPort and are connected to (TargetCID,
// TargetPort). A route is identified by (Attachment, Service, ListenPort);
// Relay.Update changes everything else in place. It is JSON round-trippable
// (the vsock backend's PUT /v1/relay carries it): Attachment encodes as
// {"Namespace": ..., "Name": ...}, the rest under the json names below.
type Route struct {
	// Attachment is the FastPathAttachment (namespace/name) the route comes from.
	Attachment types.NamespacedName `json:"attachment"`
	// Service is the vsock service name from the attachment's spec.vsock.services.
	Service string `json:"service"`
	// ListenPort is the relay port on the host CID, allocated by the operator.
	ListenPort uint32 `json:"listenPort"`
	// TargetCID is the CID of the VM offering the service (VMI status.VSOCKCID);
	// at least vsock.MinGuestCID.
	TargetCID uint32 `json:"targetCID"`
	// TargetPort is the vsock port the target guest listens on.
	TargetPort uint32 `json:"targetPort"`
	// AllowedCIDs are the source CIDs allowed to connect: the VMs selected by
	// the same attachment. Any other CID is denied.
	AllowedCIDs []uint32 `json:"allowedCIDs"`
	// MaxConns caps the route's concurrent connections; further connections
	// are refused and counted. 0 means Options.DefaultMaxConns.
	MaxConns int `json:"maxConns,omitempty"`
}

// String returns "<namespace>/<name>/<service>:<listen port>".
func (r Route) String() string {
	return fmt.Sprintf("%s/%s:%d", r.Attachment, r.Service, r.ListenPort)
}

// Validate reports what makes r unusable: an empty attachment or service
// name, a zero listen or target port, a target CID below vsock.MinGuestCID
// (0-2 are the hypervisor, loopback and the host itself) or equal to
// vsock.AnyCID, or a negative MaxConns.
func (r Route) Validate() error {
	var errs []error
	if r.Attachment.Namespace == "" || r.Attachment.Name == "" {
		errs = append(errs, errors.New("attachment namespace and name are required"))
	}
	if r.Service == "" {
		errs = append(errs, errors.New("service name is required"))
	}
	if r.ListenPort == 0 {
		errs = append(errs, errors.New("listen port must not be 0"))
	}
	if r.TargetPort == 0 {
		errs = append(errs, errors.New("target port must not be 0"))
	}
	if r.TargetCID < vsock.MinGuestCID || r.TargetCID == vsock.AnyCID {
		errs = append(errs, fmt.Errorf("target CID %d is not a guest CID (must be %d or more, not %d)", r.TargetCID, vsock.MinGuestCID, vsock.AnyCID))
	}
	if r.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("max connections %d must not be negative", r.MaxConns))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failed to validate relay route %s: %w", r, err)
	}
	return nil
}

// routeKey is the identity of a route: a listener keeps serving (and keeps
// its connections) across updates as long as its key is unchanged.
type routeKey struct {
	attachment types.NamespacedName
	service    string
	port       uint32
}

func (r Route) key() routeKey {
	return routeKey{attachment: r.Attachment, service: r.Service, port: r.ListenPort}
}

// config is a validated route prepared for the accept path.
type config struct {
	route    Route
	allowed  map[uint32]struct{}
	maxConns int
}

func newConfig(r Route, defaultMaxConns int) *config {
	c := &config{route: r, allowed: make(map[uint32]struct{}, len(r.AllowedCIDs)), maxConns: r.MaxConns}
	c.route.AllowedCIDs = slices.Clone(r.AllowedCIDs)
	for _, cid := range r.AllowedCIDs {
		c.allowed[cid] = struct{}{}
	}
	if c.maxConns == 0 {
		c.maxConns = defaultMaxConns
	}
	return c
}
