package emulation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// Label is the word every line the emulation prints starts with.
const Label = "EMULATED"

// Options configure an Emulator. Zero values take the documented defaults.
type Options struct {
	// Config reaches the API server (an admin: the emulation writes VMI and VM
	// status, Job status and mints ServiceAccount tokens). Required.
	Config *rest.Config
	// Namespaces are the namespaces whose VMs, VMIs and Jobs the emulation
	// serves; empty means all.
	Namespaces []string
	// NodeName is the node the VMIs run on (status.nodeName); default the host name.
	NodeName string

	// StateDir holds what a later run needs to clean up after a killed one
	// (the CNI result cache), plus per-VM and per-Job working directories.
	// Required; keep it across runs of the same Prefix.
	StateDir string
	// Prefix starts the name of every network namespace the emulation creates
	// ("<Prefix><namespace>.<virt-launcher pod>"); one prefix per concurrent
	// user of this host (demo, e2e). Required.
	Prefix string
	// HostIfPrefix starts the host-side veth names: 2-8 characters, unique
	// per concurrent user. Required.
	HostIfPrefix string
	// PodCIDR is the emulated cluster pod network (IPv4, /16-/28); launchers
	// get addresses from .10 upwards. Default 10.244.250.0/24.
	PodCIDR netip.Prefix

	// CNIPath are the directories searched for CNI plugins (CNI_PATH): the
	// directory the node agent installs the fastpath binary into first, then
	// the reference plugins (host-local). Default [/opt/cni/bin, /usr/lib/cni].
	CNIPath []string

	// VSOCKRoot is the UnixTransport root shared with the node agent's relay
	// (agent --vsock-transport=unix:<VSOCKRoot>). Empty disables vsock CIDs.
	VSOCKRoot string
	// FirstCID is the first guest CID handed out; default 3 (vsock.MinGuestCID).
	FirstCID uint32

	// Binaries maps a container command (e.g. "fastpath-bench") to the local
	// executable the emulated kubelet runs for it.
	Binaries map[string]string
	// RestartWhenRequired does what a user does when a FastPathAttachment
	// reports restartRequired for a VM: `virtctl restart` (emulated).
	RestartWhenRequired bool
	// Netserver is the netserver binary the emulated cloud-init starts; default
	// "netserver" from PATH.
	Netserver string

	// Guests is GuestsNetNS ("" means it: every guest a network namespace)
	// or GuestsQEMU (every guest a REAL VM, see e2e/localenv/guests).
	Guests string
	// SiblingSocketDir is the node agent's --sibling-socket-dir: where its
	// vhost-device-vsock serves the vhost-user sockets of vsock mode
	// Sibling. A real guest of a VMI annotated for Sibling is started only
	// once its socket is there, and the domain hook is told the directory.
	SiblingSocketDir string
	// GuestBin holds what real guests need (fastpath-domain-hook,
	// vhost-device-vsock, guest/): the repository's bin/. Required with
	// GuestsQEMU.
	GuestBin string

	// Out receives the emulation's log lines, each starting with Label; default
	// os.Stderr.
	Out io.Writer
}

// Emulator stands in for KubeVirt, Multus, the kubelet and the Job
// controller on this host (see the package documentation). Create it with
// New, run it with Start, and always call Stop.
type Emulator struct {
	opts Options
	cli  client.Client
	// reader reads from the API server directly (Secrets, NADs, fresh Jobs).
	reader client.Reader
	cni    *libcni.CNIConfig
	log    *logger

	hostsMu   sync.Mutex
	mu        sync.Mutex
	launchers map[types.NamespacedName]*launcher
	podIPs    map[netip.Addr]bool
	cids      map[uint32]bool
	restarted map[types.UID]bool
	jobs      map[types.UID]*jobRun

	cancel  context.CancelFunc
	done    chan error
	jobsWG  sync.WaitGroup
	stopped bool
}

// New validates opts and prepares the state directory. It starts nothing.
func New(opts Options) (*Emulator, error) {
	if opts.Config == nil {
		return nil, fmt.Errorf("failed to create the emulation: Config is required")
	}
	if opts.StateDir == "" || opts.Prefix == "" {
		return nil, fmt.Errorf("failed to create the emulation: StateDir and Prefix are required")
	}
	if l := len(opts.HostIfPrefix); l < 2 || l > 8 {
		return nil, fmt.Errorf("failed to create the emulation: HostIfPrefix %q must be 2-8 characters", opts.HostIfPrefix)
	}
	if opts.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("failed to read the host name: %w", err)
		}
		opts.NodeName = h
	}
	if !opts.PodCIDR.IsValid() {
		opts.PodCIDR = netip.MustParsePrefix("10.244.250.0/24")
	}
	if !opts.PodCIDR.Addr().Is4() || opts.PodCIDR.Bits() < 16 || opts.PodCIDR.Bits() > 28 {
		return nil, fmt.Errorf("failed to create the emulation: PodCIDR %s must be IPv4 /16-/28", opts.PodCIDR)
	}
	opts.PodCIDR = opts.PodCIDR.Masked()
	if len(opts.CNIPath) == 0 {
		opts.CNIPath = []string{"/opt/cni/bin", "/usr/lib/cni"}
	}
	switch opts.Guests {
	case "", GuestsNetNS:
		opts.Guests = GuestsNetNS
	case GuestsQEMU:
		if opts.GuestBin == "" {
			return nil, fmt.Errorf("failed to create the emulation: GuestBin is required with Guests %q", GuestsQEMU)
		}
	default:
		return nil, fmt.Errorf("failed to create the emulation: Guests %q must be %q or %q", opts.Guests, GuestsNetNS, GuestsQEMU)
	}
	if opts.FirstCID == 0 {
		opts.FirstCID = vsock.MinGuestCID
	}
	if opts.Netserver == "" {
		opts.Netserver = "netserver"
	}
	if opts.Out == nil {
		opts.Out = os.Stderr
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("failed to resolve state directory %s: %w", opts.StateDir, err)
	}
	opts.StateDir = abs
	for _, d := range []string{opts.StateDir, cniCacheDir(opts.StateDir), filepath.Join(opts.StateDir, "vms"), filepath.Join(opts.StateDir, "pods"), shimDir(opts.StateDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("failed to create state directory %s: %w", d, err)
		}
	}
	e := &Emulator{
		opts:      opts,
		cni:       libcni.NewCNIConfigWithCacheDir(opts.CNIPath, cniCacheDir(opts.StateDir), nil),
		log:       &logger{w: opts.Out},
		launchers: map[types.NamespacedName]*launcher{},
		podIPs:    map[netip.Addr]bool{},
		cids:      map[uint32]bool{},
		restarted: map[types.UID]bool{},
		jobs:      map[types.UID]*jobRun{},
	}
	if err := e.writeSSHShim(); err != nil {
		return nil, err
	}
	return e, nil
}

func cniCacheDir(state string) string { return filepath.Join(state, "cni-cache") }
func shimDir(state string) string     { return filepath.Join(state, "bin") }

// Start starts the emulated controllers (virt-controller, virt-handler with
// Multus and cloud-init, the kubelet and Job controller for runner Jobs, and
// optionally the user who restarts VMs) in a controller-runtime manager and
// returns once its caches are synced. They run until Stop.
func (e *Emulator) Start(ctx context.Context) error {
	var defaultNS map[string]cache.Config
	if len(e.opts.Namespaces) > 0 {
		defaultNS = map[string]cache.Config{}
		for _, ns := range e.opts.Namespaces {
			defaultNS[ns] = cache.Config{}
		}
	}
	skip := true
	mgr, err := ctrl.NewManager(e.opts.Config, ctrl.Options{
		Scheme:                 fpscheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: defaultNS},
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return fmt.Errorf("failed to create the emulation's manager: %w", err)
	}
	e.cli = mgr.GetClient()
	if err := EnsureKubeVirtCR(ctx, e.cli); err != nil {
		return err
	}
	for _, setup := range []func(ctrl.Manager) error{e.setupVirtController, e.setupVirtHandler, e.setupKubelet, e.setupRestarter} {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel = cancel
	e.done = make(chan error, 1)
	go func() { e.done <- mgr.Start(runCtx) }()
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		<-e.done
		return fmt.Errorf("failed to sync the emulation's caches")
	}
	e.log.printf("emulation", "KubeVirt, Multus, the kubelet and the Job controller are emulated on node %s (VMs are network namespaces %s*)", e.opts.NodeName, e.opts.Prefix)
	return nil
}

// Stop stops the controllers, kills running runner Jobs, and tears down every
// launcher: netserver, CNI DEL of each Multus network (the real plugin), the
// pod-network veth and the network namespace. It is safe to call more than
// once and after a failed Start.
func (e *Emulator) Stop() error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil
	}
	e.stopped = true
	e.mu.Unlock()
	var errs []error
	if e.cancel != nil {
		e.cancel()
		if err := <-e.done; err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("failed to run the emulation's manager: %w", err))
		}
	}
	e.mu.Lock()
	for _, r := range e.jobs {
		r.cancel()
	}
	e.mu.Unlock()
	e.jobsWG.Wait()
	e.mu.Lock()
	keys := make([]types.NamespacedName, 0, len(e.launchers))
	for k := range e.launchers {
		keys = append(keys, k)
	}
	e.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		if err := e.teardown(context.Background(), k, "the emulation stops"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// logger writes "EMULATED <component>: <message>" lines, one at a time.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *logger) printf(component, format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s %-15s %s\n", Label, component+":", msg)
}
