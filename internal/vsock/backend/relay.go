package backend

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// The relay part of the backend server's HTTP API (vsock mode Relay in the
// backend process, fastpath-vsock-backend --relay).
const (
	// RelayPath takes PUT with a JSON RelayRequest (Relay.Update: the full
	// set of routes, level-based) and GET. Both answer 200 with a
	// RelayReport; PUT answers 422 with a RelayErrorResponse (whose Report
	// is the state after the update: the routes that could be served are)
	// when some routes were refused, and 400 for a body that is not a
	// RelayRequest (nothing is changed then). A server without a relay
	// answers 404 on it.
	RelayPath = "/v1/relay"
	// MetricsPath takes GET: the relay's Prometheus metrics (and the Go
	// runtime's), text exposition format, when the server has a Metrics
	// handler; else 404.
	MetricsPath = "/metrics"
)

// RelayRequest is the body of PUT RelayPath.
type RelayRequest struct {
	// Routes are every route the relay should serve; the others are closed
	// with their connections (relay.Relay.Update).
	Routes []relay.Route `json:"routes"`
}

// RelayReport is what the backend server says about its relay.
type RelayReport struct {
	// BootID is the server's boot ID (Report.BootID): a new one means the
	// process restarted, every relayed connection and listener with it, and
	// the relay serves no route until it is told again.
	BootID string `json:"bootID"`
	// Emulation is vsock.EmulationNote of the relay's transport: "" for the
	// kernel's AF_VSOCK, else what stands in for it.
	Emulation string `json:"emulation,omitempty"`
	// Listeners are the relay's open listeners, sorted by port.
	Listeners []relay.ListenerStatus `json:"listeners"`
	// Limits are the relay's effective limits.
	Limits relay.Limits `json:"limits"`
}

// RelayErrorResponse is the body of a non-200 answer on RelayPath.
type RelayErrorResponse struct {
	// Error says what failed.
	Error string `json:"error"`
	// Report is the relay's state after a partial update (422 only).
	Report *RelayReport `json:"report,omitempty"`
}

// RelayServer is what the server serves on RelayPath: *relay.Relay is the
// real one.
type RelayServer interface {
	Update(routes []relay.Route) error
	Listeners() []relay.ListenerStatus
	Limits() relay.Limits
}

// relayHandlers adds RelayPath (and MetricsPath) to mux when the server has
// a relay (and a metrics handler).
func (s *Server) relayHandlers(mux *http.ServeMux) {
	if s.Relay != nil {
		mux.HandleFunc("GET "+RelayPath, func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, s.relayReport())
		})
		mux.HandleFunc("PUT "+RelayPath, s.putRelay)
	}
	if s.Metrics != nil {
		mux.Handle("GET "+MetricsPath, s.Metrics)
	}
}

func (s *Server) putRelay(w http.ResponseWriter, r *http.Request) {
	var req RelayRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, RelayErrorResponse{Error: fmt.Sprintf("failed to decode the relay routes: %v", err)})
		return
	}
	// Update is serialised by the relay itself.
	if err := s.Relay.Update(req.Routes); err != nil {
		s.Log.Error(err, "Failed to serve some vsock relay routes", "routes", len(req.Routes))
		rep := s.relayReport()
		writeJSON(w, http.StatusUnprocessableEntity, RelayErrorResponse{Error: err.Error(), Report: &rep})
		return
	}
	writeJSON(w, http.StatusOK, s.relayReport())
}

// closeRelay closes the Relay when it is an io.Closer.
func (s *Server) closeRelay() {
	if c, ok := s.Relay.(io.Closer); ok {
		if err := c.Close(); err != nil {
			s.Log.Error(err, "Failed to close the vsock relay")
		}
	}
}

func (s *Server) relayReport() RelayReport {
	ls := s.Relay.Listeners()
	if ls == nil {
		ls = []relay.ListenerStatus{}
	}
	return RelayReport{BootID: s.report.BootID, Emulation: s.RelayEmulation, Listeners: ls, Limits: s.Relay.Limits()}
}
