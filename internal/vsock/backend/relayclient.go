package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// RelayClient drives the relay of a backend Server (RelayPath) over its
// UNIX socket. It is the node agent's RelayProgrammer when the relay runs in
// the backend process (fastpath-agent --relay-backend-socket), so that an
// agent restart leaves the relay's listeners and relayed connections alone:
//
//   - Update sends the full set of routes (PUT RelayPath) and keeps them as
//     the wanted routes;
//   - Listeners and Limits answer from the server's LAST reply (to Update,
//     or to Run's poll), without a request: when that reply is older than
//     the last request, or the last request failed, they say what the
//     backend said last, or nothing (no listeners, zero Limits) when it has
//     not answered since the failure;
//   - Run polls GET RelayPath every PollInterval, sends the wanted routes
//     again as soon as it sees a new BootID (the backend process restarted
//     and serves no route), and calls OnChange when what it reports (but the
//     listeners' ActiveConns) or its reachability changed.
//
// Create it with NewRelayClient; its methods are safe for concurrent use.
type RelayClient struct {
	// Socket is the server's socket path.
	Socket string
	// Emulation is what the agent expects of the backend relay's transport:
	// vsock.EmulationNote of the agent's own --vsock-transport ("" for
	// AF_VSOCK). A backend reporting another is a misconfiguration, and
	// Update fails naming both: the agent's status would otherwise describe
	// a transport the relay does not use.
	Emulation string
	// PollInterval overrides DefaultPollInterval when positive.
	PollInterval time.Duration
	// OnChange, when set, is called (on Run's goroutine) after the relay's
	// report or its reachability changed.
	OnChange func()
	// Log receives the restarts and re-sends Run sees.
	Log logr.Logger

	http *http.Client

	// putMu orders the PUTs of Update and Poll: each sends the wanted
	// routes as they are when it holds it, so a re-send after a restart
	// never overtakes a newer Update with older routes.
	putMu sync.Mutex

	mu     sync.Mutex
	wanted []relay.Route // the routes of the last Update
	sent   bool          // Update was called at least once
	last   *RelayReport  // the last reply; nil before the first or after a failed request
	err    error         // the last request's error
	boot   string        // the BootID of the last reply, kept across errors
}

// NewRelayClient returns a client of the relay of the server at socket
// that expects the relay's transport to be emulation (see
// RelayClient.Emulation).
func NewRelayClient(socket, emulation string) *RelayClient {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    1,
		IdleConnTimeout: time.Minute,
	}
	return &RelayClient{Socket: socket, Emulation: emulation, http: &http.Client{Transport: tr, Timeout: DefaultRequestTimeout}}
}

// Update sends routes to the backend's relay (PUT RelayPath) and keeps them
// as the wanted routes Run sends again after a backend restart. Errors: the
// backend unreachable, answering garbage or running no relay (each naming
// the socket), refusing some routes (its message; the others are served),
// or reporting a transport other than Emulation.
func (c *RelayClient) Update(routes []relay.Route) error {
	c.putMu.Lock()
	defer c.putMu.Unlock()
	c.mu.Lock()
	c.wanted, c.sent = slices.Clone(routes), true
	c.mu.Unlock()
	return c.put(context.Background(), routes)
}

// Listeners returns the listeners of the backend's last reply; none when
// the last request failed or nothing was asked yet.
func (c *RelayClient) Listeners() []relay.ListenerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return nil
	}
	return slices.Clone(c.last.Listeners)
}

// Limits returns the limits of the backend's last reply; the zero Limits
// when the last request failed or nothing was asked yet.
func (c *RelayClient) Limits() relay.Limits {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return relay.Limits{}
	}
	return c.last.Limits
}

// Report returns the backend's last reply and the last request's error
// (one of them nil; both nil before the first request).
func (c *RelayClient) Report() (*RelayReport, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.err
}

// Run polls the backend's relay every PollInterval until ctx ends
// (returning nil); see RelayClient.
func (c *RelayClient) Run(ctx context.Context) error {
	return pollLoop(ctx, c.PollInterval, c.Poll)
}

// Poll runs one round of Run: GET RelayPath, the routes again to a
// restarted backend, OnChange on a change.
func (c *RelayClient) Poll(ctx context.Context) {
	c.mu.Lock()
	before, beforeErr, boot := c.last, c.err, c.boot
	c.mu.Unlock()
	err := c.do(ctx, http.MethodGet, nil)
	c.mu.Lock()
	now := c.last
	c.mu.Unlock()
	if err == nil && now != nil && boot != "" && now.BootID != boot {
		c.resend(ctx, now.BootID)
	}
	c.mu.Lock()
	after, afterErr := c.last, c.err
	c.mu.Unlock()
	if errString(beforeErr) != errString(afterErr) || !reflect.DeepEqual(withoutActive(before), withoutActive(after)) {
		if afterErr != nil && beforeErr == nil {
			c.Log.Error(afterErr, "The vsock backend's relay does not answer")
		}
		if c.OnChange != nil {
			c.OnChange()
		}
	}
}

// resend sends the wanted routes again to a backend that restarted (boot
// is its new BootID), unless Update was never called.
func (c *RelayClient) resend(ctx context.Context, boot string) {
	c.putMu.Lock()
	defer c.putMu.Unlock()
	c.mu.Lock()
	wanted, sent := slices.Clone(c.wanted), c.sent
	c.mu.Unlock()
	if !sent {
		return
	}
	c.Log.Info("The vsock backend restarted; sending its relay the routes again", "socket", c.Socket, "bootID", boot, "routes", len(wanted))
	if err := c.put(ctx, wanted); err != nil {
		c.Log.Error(err, "Failed to send the routes to the restarted vsock backend's relay")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// withoutActive is rep without the listeners' ActiveConns, which change
// with every connection and are not in the agent's status.
func withoutActive(rep *RelayReport) *RelayReport {
	if rep == nil {
		return nil
	}
	out := *rep
	out.Listeners = slices.Clone(rep.Listeners)
	for i := range out.Listeners {
		out.Listeners[i].ActiveConns = 0
	}
	return &out
}

// put sends routes (PUT RelayPath) and records the answer.
func (c *RelayClient) put(ctx context.Context, routes []relay.Route) error {
	if routes == nil {
		routes = []relay.Route{}
	}
	body, err := json.Marshal(RelayRequest{Routes: routes})
	if err != nil {
		return fmt.Errorf("failed to encode the relay routes: %w", err)
	}
	return c.do(ctx, http.MethodPut, body)
}

// do makes one request on RelayPath and records its reply (or its failure)
// as the last.
func (c *RelayClient) do(ctx context.Context, method string, body []byte) error {
	rep, err := request[RelayReport](ctx, c.http, c.Socket, method, RelayPath, body)
	var refused *refusedError[RelayReport]
	if errors.As(err, &refused) && refused.status == http.StatusNotFound {
		err = fmt.Errorf("the vsock backend at %s runs no relay (%s %s: %s): start it with --relay", c.Socket, method, RelayPath, http.StatusText(refused.status))
	}
	if err == nil && rep.Emulation != c.Emulation {
		err = fmt.Errorf("the vsock backend at %s runs its relay over %s, but the agent's --vsock-transport is %s: give both the same transport",
			c.Socket, describeTransport(rep.Emulation), describeTransport(c.Emulation))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case rep != nil:
		c.last, c.err, c.boot = rep, nil, rep.BootID
	case errors.As(err, &refused) && refused.report != nil:
		// The server answered: its report stands, the refusal is Update's error.
		c.last, c.err, c.boot = refused.report, nil, refused.report.BootID
	default:
		c.last, c.err = nil, err
	}
	return err
}

func describeTransport(emulation string) string {
	if emulation == "" {
		return "AF_VSOCK"
	}
	return fmt.Sprintf("%q", emulation)
}
