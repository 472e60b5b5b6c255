package hostcpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
)

// Path is the endpoint's URL path; pods are asked for with repeated query
// parameters: GET /hostcpu?pod=<uid>&pod=<uid>.
const Path = "/hostcpu"

// MaxPods bounds the pods of one request (a benchmark asks for the client
// and server launchers of the pairs of one point).
const MaxPods = 64

// Handler serves Path.
type Handler struct {
	Reader Reader
	// Allowed decides whether the pod with uid may be read: nil when it
	// may, else why not (answered 403). The agent allows the pods on its
	// node that a VirtualMachineInstance controls.
	Allowed func(ctx context.Context, uid string) error
	Log     logr.Logger
}

// ServeHTTP answers a GET with the HostCPUReading as JSON; 400 for a
// request without pods, with too many or with one that is not a UUID, 403
// for a pod Allowed refuses, 404 for one without a cgroup here, 405 for
// another method, 500 when a counter cannot be read.
func (h Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	uids := req.URL.Query()["pod"]
	switch {
	case len(uids) == 0:
		http.Error(w, "ask for at least one pod: ?pod=<uid>", http.StatusBadRequest)
		return
	case len(uids) > MaxPods:
		http.Error(w, fmt.Sprintf("at most %d pods", MaxPods), http.StatusBadRequest)
		return
	}
	for _, uid := range uids {
		if !ValidUID(uid) {
			http.Error(w, fmt.Sprintf("pod %q is not a pod uid (a lower-case UUID)", uid), http.StatusBadRequest)
			return
		}
		if h.Allowed != nil {
			if err := h.Allowed(req.Context(), uid); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
	}
	reading, err := h.Reader.Read(uids)
	switch {
	case errors.Is(err, ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		h.Log.Error(err, "Failed to read host CPU")
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reading)
}

// Serve serves h on addr until ctx ends (a manager.Runnable's body).
func Serve(ctx context.Context, addr string, h Handler) error {
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to listen for the host CPU endpoint on %s: %w", addr, err)
	}
	h.Log.Info("Serving host CPU", "address", ln.Addr().String(), "path", Path)
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("failed to serve the host CPU endpoint on %s: %w", addr, err)
	}
	return nil
}
