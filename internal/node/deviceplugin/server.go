package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Resource is one extended resource a Server offers to kubelet.
type Resource struct {
	// Name is the extended resource name, e.g. macvtap.fastpath.io/fastpath0.
	Name string
	// Devices are the device IDs, all the same kind.
	Devices []string
	// Allocate returns what a container that was given the devices ids gets
	// (device nodes, mounts, environment). ids are always IDs of Devices.
	Allocate func(ids []string) (*pluginapi.ContainerAllocateResponse, error)
	// PreStart, when set, makes the server register with PreStartRequired:
	// kubelet then calls it with a container's device IDs after Allocate and
	// before the container starts (within
	// pluginapi.KubeletPreStartContainerRPCTimeoutInSecs, 30 s); an error
	// fails that start (kubelet reports it on the pod and retries).
	PreStart func(ctx context.Context, ids []string) error
}

// options returns the resource's device plugin options.
func (r Resource) options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{PreStartRequired: r.PreStart != nil}
}

// Defaults of Server.
const (
	// DefaultWatchInterval is how often a Server checks that its socket is
	// still there: kubelet deletes every socket in its device plugin
	// directory when it restarts, and a plugin must then serve and register
	// again.
	DefaultWatchInterval = time.Second
	// registerTimeout bounds one registration with kubelet.
	registerTimeout = 10 * time.Second
)

// Server serves one Resource on a UNIX socket in Dir through the kubelet
// device plugin API v1beta1 (DevicePlugin service) and registers it with
// kubelet at KubeletSocket. It serves and registers again when kubelet
// removes its socket (a kubelet restart). Create it with NewServer.
type Server struct {
	res           Resource
	dir, kubelet  string
	watchInterval time.Duration
	log           logr.Logger

	mu       sync.Mutex
	healthy  bool
	changed  chan struct{} // closed and replaced when healthy changes
	grpcSrv  *grpc.Server
	lastErr  error
	cancel   context.CancelFunc
	done     chan struct{}
	register int // successful registrations, for tests and status
}

// NewServer returns a server for res with its socket in dir (kubelet's
// device plugin directory, pluginapi.DevicePluginPath on a node) and
// kubelet's registration socket kubeletSocket; watchInterval 0 means
// DefaultWatchInterval. Its devices start healthy.
func NewServer(res Resource, dir, kubeletSocket string, watchInterval time.Duration, log logr.Logger) *Server {
	if watchInterval <= 0 {
		watchInterval = DefaultWatchInterval
	}
	return &Server{res: res, dir: dir, kubelet: kubeletSocket, watchInterval: watchInterval, log: log.WithValues("resource", res.Name),
		healthy: true, changed: make(chan struct{})}
}

// SocketName returns the socket file name of resource name in the device
// plugin directory: "fastpath-" followed by name with '/' replaced by '_'.
func SocketName(name string) string {
	return "fastpath-" + strings.ReplaceAll(name, "/", "_") + ".sock"
}

// Socket returns the path of the server's socket.
func (s *Server) Socket() string { return filepath.Join(s.dir, SocketName(s.res.Name)) }

// Start serves and registers, then keeps doing so whenever the socket
// disappears, until Stop. It returns the first serve or registration error
// (the server keeps retrying in the background; Err reports the latest).
func (s *Server) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.cancel, s.done = cancel, make(chan struct{})
	s.mu.Unlock()
	err := s.serveAndRegister(ctx)
	go s.watch(ctx)
	return err
}

// Stop stops serving and removes the socket. Kubelet then marks the
// resource's devices unhealthy and stops offering them.
func (s *Server) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	s.mu.Lock()
	if s.grpcSrv != nil {
		s.grpcSrv.Stop()
		s.grpcSrv = nil
	}
	s.mu.Unlock()
	_ = os.Remove(s.Socket())
}

// SetHealthy reports every device healthy or not to kubelet (ListAndWatch
// sends the new list).
func (s *Server) SetHealthy(healthy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.healthy == healthy {
		return
	}
	s.healthy = healthy
	close(s.changed)
	s.changed = make(chan struct{})
}

// Err returns the latest serve or registration error, nil once registered.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Registrations counts the successful registrations with kubelet.
func (s *Server) Registrations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.register
}

func (s *Server) watch(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.watchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, statErr := os.Stat(s.Socket())
		if statErr == nil && s.Err() == nil {
			continue
		}
		if statErr != nil {
			s.log.Info("Device plugin socket gone (kubelet restarted?); serving and registering again", "socket", s.Socket())
		}
		if err := s.serveAndRegister(ctx); err != nil {
			s.log.Error(err, "Failed to serve or register the device plugin; retrying")
		}
	}
}

// serveAndRegister (re)starts the gRPC server on a fresh socket and
// registers with kubelet, recording the outcome in lastErr.
func (s *Server) serveAndRegister(ctx context.Context) error {
	err := s.serve()
	if err == nil {
		err = s.registerWithKubelet(ctx)
	}
	s.mu.Lock()
	s.lastErr = err
	if err == nil {
		s.register++
	}
	s.mu.Unlock()
	if err == nil {
		s.log.Info("Registered device plugin with kubelet", "socket", s.Socket(), "devices", len(s.res.Devices))
	}
	return err
}

func (s *Server) serve() error {
	s.mu.Lock()
	if s.grpcSrv != nil {
		s.grpcSrv.Stop()
		s.grpcSrv = nil
	}
	s.mu.Unlock()
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("failed to create device plugin directory %s: %w", s.dir, err)
	}
	if err := os.Remove(s.Socket()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to remove stale device plugin socket %s: %w", s.Socket(), err)
	}
	ln, err := net.Listen("unix", s.Socket())
	if err != nil {
		return fmt.Errorf("failed to listen on device plugin socket %s: %w", s.Socket(), err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, &service{s: s})
	s.mu.Lock()
	s.grpcSrv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

func (s *Server) registerWithKubelet(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+s.kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("failed to reach kubelet at %s: %w", s.kubelet, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     SocketName(s.res.Name),
		ResourceName: s.res.Name,
		Options:      s.res.options(),
	})
	if err != nil {
		return fmt.Errorf("failed to register resource %s with kubelet at %s: %w", s.res.Name, s.kubelet, err)
	}
	return nil
}

// devices returns the device list to send and the channel closed at the
// next health change.
func (s *Server) devices() ([]*pluginapi.Device, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	health := pluginapi.Healthy
	if !s.healthy {
		health = pluginapi.Unhealthy
	}
	out := make([]*pluginapi.Device, len(s.res.Devices))
	for i, id := range s.res.Devices {
		out[i] = &pluginapi.Device{ID: id, Health: health}
	}
	return out, s.changed
}

// service implements pluginapi.DevicePluginServer for a Server.
type service struct {
	pluginapi.UnimplementedDevicePluginServer
	s *Server
}

func (v *service) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return v.s.res.options(), nil
}

// ListAndWatch sends the devices, then again on every health change, until
// kubelet closes the stream or the server stops.
func (v *service) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		devs, changed := v.s.devices()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		}
	}
}

// Allocate answers each container request with Resource.Allocate; an ID
// that is not one of the resource's devices is an error.
func (v *service) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		for _, id := range cr.DevicesIds {
			if !slices.Contains(v.s.res.Devices, id) {
				return nil, fmt.Errorf("failed to allocate device %s: resource %s has no such device", id, v.s.res.Name)
			}
		}
		car, err := v.s.res.Allocate(cr.DevicesIds)
		if err != nil {
			return nil, err
		}
		resp.ContainerResponses = append(resp.ContainerResponses, car)
	}
	return resp, nil
}

// PreStartContainer runs Resource.PreStart (when set) with the container's
// device IDs; an ID that is not one of the resource's devices is an error.
func (v *service) PreStartContainer(ctx context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	if v.s.res.PreStart == nil {
		return &pluginapi.PreStartContainerResponse{}, nil
	}
	for _, id := range req.DevicesIds {
		if !slices.Contains(v.s.res.Devices, id) {
			return nil, fmt.Errorf("failed to prepare device %s: resource %s has no such device", id, v.s.res.Name)
		}
	}
	if err := v.s.res.PreStart(ctx, req.DevicesIds); err != nil {
		return nil, err
	}
	return &pluginapi.PreStartContainerResponse{}, nil
}
