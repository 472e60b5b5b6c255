package backend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
)

// The HTTP API of the backend server, on a UNIX socket (Server, Client).
const (
	// GroupsPath takes PUT with a JSON GroupsRequest: Supervisor.Sync.
	// Answers 200 with a Report when every group synced, 422 with an
	// ErrorResponse (whose Report is the state after the sync) when some
	// did not, 400 for a body that is not a GroupsRequest or names a socket
	// outside the server's directory (nothing is changed then).
	GroupsPath = "/v1/groups"
	// StatusPath takes GET: 200 with a Report.
	StatusPath = "/v1/status"
	// maxRequestBytes bounds a PUT body: 64 groups of 64 VMs of ~300 bytes
	// is ~1.2 MiB; 8 MiB leaves room and still bounds a bad client.
	maxRequestBytes = 8 << 20
)

// GroupsRequest is the body of PUT GroupsPath.
type GroupsRequest struct {
	// Groups are every group the backend should serve; the others stop
	// (when idle, Supervisor.Sync).
	Groups []Group `json:"groups"`
}

// Report is what the backend server says about itself and its groups.
type Report struct {
	// Version of vhost-device-vsock ("0.3.0").
	Version string `json:"version"`
	// BootID is random per server start (32 hex digits): a new one means the
	// server restarted, its processes with it, and it serves no group until
	// it is told again.
	BootID string `json:"bootID"`
	// Started is when the server started (RFC 3339 in JSON).
	Started time.Time `json:"started"`
	// Groups are the Supervisor's Status, in key order.
	Groups []Status `json:"groups"`
}

// ErrorResponse is the body of a non-200 answer.
type ErrorResponse struct {
	// Error says what failed.
	Error string `json:"error"`
	// Report is the state after a partial sync (422 only).
	Report *Report `json:"report,omitempty"`
}

// Syncer is what the server serves: *Supervisor is the real one.
type Syncer interface {
	Sync(groups []Group) error
	Status() []Status
}

// Server serves a Syncer over HTTP (GroupsPath, StatusPath), and
// optionally a relay (RelayPath, MetricsPath), on a UNIX
// socket: the long-lived half of vsock mode Sibling's backend, in a pod of
// its own so that an agent restart (a new agent image) leaves the
// vhost-device-vsock processes and the guests' connections alone. It needs
// no Kubernetes client. Create it with NewServer.
type Server struct {
	// Supervisor runs the groups; nil: the server runs no Sibling groups
	// (GroupsPath answers 404, StatusPath reports none).
	Supervisor Syncer
	// Relay, when set, is served on RelayPath (relay.go): vsock mode
	// Relay's relay in this process, so that an agent restart leaves its
	// listeners and relayed connections alone.
	Relay RelayServer
	// RelayEmulation is vsock.EmulationNote of the relay's transport,
	// reported in RelayReport.Emulation ("" for AF_VSOCK).
	RelayEmulation string
	// Metrics, when set, is served on MetricsPath (the relay's metrics).
	Metrics http.Handler
	// SocketDir, when set, is the one directory every VM's Socket and
	// UDSPath must be directly in: a client cannot make the backend bind
	// or remove a file anywhere else (nor the server's own socket).
	SocketDir string
	// Log receives one line per sync that changed or failed.
	Log logr.Logger

	report Report
}

// NewServer returns a server of sup reporting version (of
// vhost-device-vsock), with a fresh BootID and Started now. Errors: no
// randomness for the BootID.
func NewServer(sup Syncer, version string) (*Server, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("failed to make a boot ID: %w", err)
	}
	return &Server{Supervisor: sup, report: Report{Version: version, BootID: hex.EncodeToString(id), Started: time.Now().UTC().Truncate(time.Second)}}, nil
}

// BootID returns the server's boot ID (Report.BootID).
func (s *Server) BootID() string { return s.report.BootID }

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StatusPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.current())
	})
	if s.Supervisor != nil {
		mux.HandleFunc("PUT "+GroupsPath, s.putGroups)
	}
	s.relayHandlers(mux)
	return mux
}

func (s *Server) putGroups(w http.ResponseWriter, r *http.Request) {
	var req GroupsRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorResponse{Error: fmt.Sprintf("failed to decode the groups: %v", err)})
		return
	}
	if err := s.checkPaths(req.Groups); err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorResponse{Error: err.Error()})
		return
	}
	if err := s.Supervisor.Sync(req.Groups); err != nil {
		s.Log.Error(err, "Failed to sync some vhost-device-vsock groups", "groups", len(req.Groups))
		rep := s.current()
		writeJSON(w, http.StatusUnprocessableEntity, ErrorResponse{Error: err.Error(), Report: &rep})
		return
	}
	writeJSON(w, http.StatusOK, s.current())
}

// checkPaths refuses a group with a socket outside SocketDir.
func (s *Server) checkPaths(groups []Group) error {
	if s.SocketDir == "" {
		return nil
	}
	dir := filepath.Clean(s.SocketDir)
	for _, g := range groups {
		for i, vm := range g.VMs {
			for field, p := range map[string]string{"socket": vm.Socket, "udsPath": vm.UDSPath} {
				if filepath.Dir(p) != dir || filepath.Base(p) == ControlSocketName {
					return fmt.Errorf("group %s: vms[%d].%s %q must be a file directly in %s other than %s", g.Key, i, field, p, dir, ControlSocketName)
				}
			}
		}
	}
	return nil
}

func (s *Server) current() Report {
	rep := s.report
	if s.Supervisor != nil {
		rep.Groups = s.Supervisor.Status()
	}
	if rep.Groups == nil {
		rep.Groups = []Status{}
	}
	return rep
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ControlSocketName is the default base name of the server's socket, beside
// the vhost-user sockets it serves.
const ControlSocketName = "control.sock"

// Serve listens on the UNIX socket path (a stale socket there is replaced;
// anything else there is an error), gives it mode (e.g. 0660: the socket's
// group, the agent's supplementary group, may connect) and serves Handler
// until ctx ends, then closes the listener and removes the socket, and
// closes the Relay when it is an io.Closer (*relay.Relay is): its listeners
// go and every relayed connection ends at once (EOF or reset at the
// guests), so a stopped backend leaves no relayed connection hanging. Errors:
// path cannot be bound or chmodded, or the server fails.
func (s *Server) Serve(ctx context.Context, path string, mode os.FileMode) error {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != os.ModeSocket {
			return fmt.Errorf("failed to listen on %s: it exists and is not a socket (mode %s)", path, st.Mode())
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("failed to remove the stale socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", path, err)
	}
	// net.UnixListener removes the socket file on Close.
	if err := os.Chmod(path, mode); err != nil {
		_ = l.Close()
		return fmt.Errorf("failed to set mode %v on %s: %w", mode, path, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		case <-done:
		}
	}()
	s.Log.Info("Serving the vsock backend", "socket", path, "bootID", s.report.BootID, "version", s.report.Version)
	err = srv.Serve(l)
	close(done)
	s.closeRelay()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("failed to serve on %s: %w", path, err)
}
