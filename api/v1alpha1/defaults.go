package v1alpha1

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Defaults of the fastpath.io/v1alpha1 API. They are applied in code (not by the
// CRD), by the Default* functions below, so a stored object keeps exactly what
// the user wrote and a later release can change a default in one place.
// Sources: docs/design.md §1 and §2 (MTU 9000 jumbo frames and offloads on from the
// ESX networking talk, rx ring 1024 from the VMXNET3 paper, tx ring 256 because
// vhost-net accepts no other size) and §5.1 (the papers' netperf matrix).
const (
	DefaultPlacement   = PlacementRequired
	DefaultDatapath    = DatapathLinuxBridge
	DefaultBridge      = wellknown.DefaultBridge
	DefaultMTU         = int32(wellknown.DefaultMTU)
	DefaultRxQueueSize = int32(1024)
	DefaultTxQueueSize = int32(256)
	DefaultQueues      = int32(1)
	DefaultVSOCKMode   = VSOCKModeRelay

	DefaultMode        = BenchmarkModeVM
	DefaultBaseline    = BaselinePodNetwork
	DefaultDuration    = 60 * time.Second
	DefaultRepetitions = int32(3)
	DefaultPairs       = int32(1)
	DefaultSSHUser     = "fedora"
)

var (
	// DefaultTests are the benchmark tests when spec.tests is empty.
	DefaultTests = []BenchmarkTest{TestTCPStream, TestTCPRR}
	// DefaultSocketSizes are the VMCI paper's 64 KB and 256 KB socket buffers, bytes.
	DefaultSocketSizes = []int32{65536, 262144}
	// DefaultMessageSizes are the papers' message sizes, bytes.
	DefaultMessageSizes = []int32{512, 4096, 16384, 65536}
	// DefaultSessions are the papers' 1 and 5 concurrent sessions.
	DefaultSessions = []int32{1, 5}
)

// DefaultEviction is spec.eviction's default for a placement: MigrateTogether
// where the VMs share a node (Required, Preferred), MigrateAlone for None.
func DefaultEviction(p Placement) Eviction {
	if p == PlacementNone {
		return EvictionMigrateAlone
	}
	return EvictionMigrateTogether
}

// MaxMoveAttempts is how many migrations the operator creates for one VM of
// a move (MoveStatus) before it gives the move up as failed.
const MaxMoveAttempts = 3

// DefaultAttachmentSpec returns a copy of spec with every unset field set to its
// default. A nil network or vsock stays nil (they are not defaulted into
// existence). It never fails and never mutates its argument.
func DefaultAttachmentSpec(spec FastPathAttachmentSpec) FastPathAttachmentSpec {
	out := *spec.DeepCopy()
	if out.Placement == "" {
		out.Placement = DefaultPlacement
	}
	if out.Eviction == "" {
		out.Eviction = DefaultEviction(out.Placement)
	}
	if v := out.VSOCK; v != nil && v.Mode == "" {
		v.Mode = DefaultVSOCKMode
	}
	if n := out.Network; n != nil {
		if n.Datapath == "" {
			n.Datapath = DefaultDatapath
		}
		if n.Bridge == "" {
			n.Bridge = DefaultBridge
		}
		if n.MTU == nil {
			n.MTU = ptrTo(DefaultMTU)
		}
		if n.Offloads == nil {
			n.Offloads = &Offloads{}
		}
		n.Offloads.FillFrom(AllOffloads(OffloadOn))
		if n.RxQueueSize == nil {
			n.RxQueueSize = ptrTo(DefaultRxQueueSize)
		}
		if n.TxQueueSize == nil {
			n.TxQueueSize = ptrTo(DefaultTxQueueSize)
		}
		if n.Queues == nil {
			n.Queues = ptrTo(DefaultQueues)
		}
	}
	return out
}

// DefaultBenchmarkSpec returns a copy of spec with every unset field set to its
// default (docs/design.md §5.1 matrix). It never mutates its argument.
func DefaultBenchmarkSpec(spec FastPathBenchmarkSpec) FastPathBenchmarkSpec {
	out := *spec.DeepCopy()
	if out.Mode == "" {
		out.Mode = DefaultMode
	}
	if len(out.Tests) == 0 {
		out.Tests = append([]BenchmarkTest(nil), DefaultTests...)
	}
	if len(out.SocketSizes) == 0 {
		out.SocketSizes = append([]int32(nil), DefaultSocketSizes...)
	}
	if len(out.MessageSizes) == 0 {
		out.MessageSizes = append([]int32(nil), DefaultMessageSizes...)
	}
	if len(out.Sessions) == 0 {
		out.Sessions = append([]int32(nil), DefaultSessions...)
	}
	if out.Duration == nil {
		out.Duration = &metav1.Duration{Duration: DefaultDuration}
	}
	if out.Repetitions == nil {
		out.Repetitions = ptrTo(DefaultRepetitions)
	}
	if out.Pairs == nil {
		out.Pairs = ptrTo(DefaultPairs)
	}
	if out.Baseline == "" {
		out.Baseline = DefaultBaseline
	}
	if out.SSHUser == "" {
		out.SSHUser = DefaultSSHUser
	}
	return out
}

// On reports whether an offload state is On (the zero value counts as On, the default).
func (s OffloadState) On() bool { return s != OffloadOff }

func ptrTo[T any](v T) *T { return &v }

// Offload returns o's field for the offload named name (a row of
// wellknown.Offloads), or nil when Offloads has no field of that JSON name.
// Consumers range over wellknown.Offloads and reach each field through it.
func (o *Offloads) Offload(name string) *OffloadState {
	return wellknown.OffloadField[OffloadState](o, name)
}

// FillFrom sets every offload of o that is unset ("") to defaults' value for
// it, and returns o.
func (o *Offloads) FillFrom(defaults Offloads) *Offloads {
	for _, row := range wellknown.Offloads {
		if p := o.Offload(row.Name); *p == "" {
			*p = *defaults.Offload(row.Name)
		}
	}
	return o
}

// AllOffloads returns Offloads with every offload set to state.
func AllOffloads(state OffloadState) Offloads {
	var o Offloads
	for _, row := range wellknown.Offloads {
		*o.Offload(row.Name) = state
	}
	return o
}

// Format lists o's offloads in wellknown.Offloads order as name, kv, state,
// joined by sep: Format(" ", ", ") is "tso On, gso On, gro On, ...".
func (o Offloads) Format(kv, sep string) string {
	parts := make([]string, len(wellknown.Offloads))
	for i, row := range wellknown.Offloads {
		parts[i] = row.Name + kv + string(*o.Offload(row.Name))
	}
	return strings.Join(parts, sep)
}
