package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Defaults of a Client.
const (
	// DefaultPollInterval is how often a Client asks the server for its
	// status: the server pushes nothing, so a process that exits or restarts
	// is seen within this long (plus the request).
	DefaultPollInterval = 2 * time.Second
	// DefaultRequestTimeout bounds one request. A sync that stops idle
	// groups waits for their processes (up to StopTimeout, 7 s, each).
	DefaultRequestTimeout = 30 * time.Second
)

// Client drives a backend Server over its UNIX socket. It is the node
// agent's SiblingSupervisor when the backend runs in a pod of its own
// (fastpath-agent --sibling-backend-socket): Sync sends the wanted groups,
// Status returns the last status the server reported, and Run polls the
// server, calls OnChange when what it reports changes, and sends the last
// wanted groups again when the server restarted (a new BootID). Create it
// with NewClient; its methods are safe for concurrent use.
type Client struct {
	// Socket is the server's socket path.
	Socket string
	// PollInterval overrides DefaultPollInterval when positive.
	PollInterval time.Duration
	// OnChange, when set, is called (on Run's goroutine) after the server's
	// report or reachability changed.
	OnChange func()
	// Log receives the restarts and re-syncs Run sees.
	Log logr.Logger

	http *http.Client

	mu     sync.Mutex
	wanted []Group // nil until the first Sync
	synced bool    // Sync was called at least once
	last   *Report // the server's last report; nil before the first or after an error
	err    error   // the last request's error
	boot   string  // the BootID of the last report, kept across errors
}

// NewClient returns a client of the server at socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    1,
		IdleConnTimeout: time.Minute,
	}
	return &Client{Socket: socket, http: &http.Client{Transport: tr, Timeout: DefaultRequestTimeout}}
}

// Sync sends groups to the server (PUT GroupsPath) and keeps them as the
// wanted groups Run sends again after a server restart. Errors: the server
// unreachable or answering garbage (naming the socket), or refusing some
// groups (its message; the others are synced).
func (c *Client) Sync(groups []Group) error {
	c.mu.Lock()
	c.wanted, c.synced = slices.Clone(groups), true
	c.mu.Unlock()
	_, err := c.put(context.Background(), groups)
	return err
}

// Status returns the groups of the server's last report. When the last
// request failed it returns one entry per wanted group, not running, whose
// Message says the backend at Socket is unreachable and why: the agent's
// FastPathNode then says what is wrong.
func (c *Client) Status() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.last != nil {
		return slices.Clone(c.last.Groups)
	}
	msg := fmt.Sprintf("the vsock backend at %s has not answered yet", c.Socket)
	if c.err != nil {
		msg = c.err.Error()
	}
	out := make([]Status, 0, len(c.wanted))
	for _, g := range c.wanted {
		out = append(out, Status{Key: g.Key, Message: msg})
	}
	return out
}

// Version returns the vhost-device-vsock version of the server's last
// report; "" while the server has not answered or the last request failed.
func (c *Client) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.last == nil {
		return ""
	}
	return c.last.Version
}

// Report returns the server's last report and the last request's error
// (one of them nil; both nil before the first request).
func (c *Client) Report() (*Report, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.err
}

// Fresh asks the server for its status now and returns its groups (the
// process serving each, with its start), without recording the answer (Run
// alone follows the BootID). Errors: the server unreachable or refusing.
func (c *Client) Fresh(ctx context.Context) ([]Status, error) {
	rep, err := request[Report](ctx, c.http, c.Socket, http.MethodGet, StatusPath, nil)
	if err != nil {
		return nil, err
	}
	return rep.Groups, nil
}

// Run polls the server every PollInterval until ctx ends (returning nil):
// it calls OnChange when the report (or the reachability) changed, and
// when the BootID changed and Sync was called before, it sends the wanted
// groups again first, so a restarted backend serves them without waiting
// for the agent's next reconcile.
func (c *Client) Run(ctx context.Context) error {
	return pollLoop(ctx, c.PollInterval, c.poll)
}

// pollLoop calls poll at once and then every interval (DefaultPollInterval
// when interval is not above 0) until ctx ends, and returns nil then.
func pollLoop(ctx context.Context, interval time.Duration, poll func(context.Context)) error {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// poll runs one round of Run.
func (c *Client) poll(ctx context.Context) {
	c.mu.Lock()
	before, beforeErr, boot := c.last, c.err, c.boot
	c.mu.Unlock()
	rep, err := c.get(ctx)
	if err == nil && boot != "" && rep.BootID != boot {
		c.Log.Info("The vsock backend restarted; sending it the wanted groups again", "socket", c.Socket, "bootID", rep.BootID, "started", rep.Started)
		c.mu.Lock()
		wanted, synced := slices.Clone(c.wanted), c.synced
		c.mu.Unlock()
		if synced {
			if _, err := c.put(ctx, wanted); err != nil {
				c.Log.Error(err, "Failed to send the wanted groups to the restarted vsock backend")
			}
		}
	}
	c.mu.Lock()
	after, afterErr := c.last, c.err
	c.mu.Unlock()
	if (beforeErr == nil) != (afterErr == nil) || (afterErr != nil && beforeErr.Error() != afterErr.Error()) || !reflect.DeepEqual(before, after) {
		if afterErr != nil && beforeErr == nil {
			c.Log.Error(afterErr, "The vsock backend does not answer")
		}
		if c.OnChange != nil {
			c.OnChange()
		}
	}
}

// get asks for the status (GET StatusPath) and records the answer.
func (c *Client) get(ctx context.Context) (*Report, error) {
	return c.do(ctx, http.MethodGet, StatusPath, nil)
}

// put sends groups (PUT GroupsPath) and records the answer.
func (c *Client) put(ctx context.Context, groups []Group) (*Report, error) {
	if groups == nil {
		groups = []Group{}
	}
	body, err := json.Marshal(GroupsRequest{Groups: groups})
	if err != nil {
		return nil, fmt.Errorf("failed to encode the groups: %w", err)
	}
	return c.do(ctx, http.MethodPut, GroupsPath, body)
}

// do makes one request and records its report (or its failure) as the last.
func (c *Client) do(ctx context.Context, method, path string, body []byte) (*Report, error) {
	rep, err := request[Report](ctx, c.http, c.Socket, method, path, body)
	c.mu.Lock()
	defer c.mu.Unlock()
	var refused *refusedError[Report]
	switch {
	case err == nil:
		c.last, c.err, c.boot = rep, nil, rep.BootID
	case errors.As(err, &refused) && refused.report != nil:
		// The server answered: its report stands, the refusal is Sync's error.
		c.last, c.err, c.boot = refused.report, nil, refused.report.BootID
	default:
		c.last, c.err = nil, err
	}
	return rep, err
}

// refusedError is a 4xx/5xx answer of the server; report is R's state
// that came with it (a partial update's, 422 only), or nil.
type refusedError[R any] struct {
	msg    string
	status int
	report *R
}

func (e *refusedError[R]) Error() string { return e.msg }

// errorAnswer is the shape of ErrorResponse and RelayErrorResponse.
type errorAnswer[R any] struct {
	Error  string `json:"error"`
	Report *R     `json:"report,omitempty"`
}

// request makes one HTTP request over hc to the server on socket and
// decodes its 200 answer as an R (at most maxRequestBytes).
// Errors: the server unreachable or its answer unreadable; a
// *refusedError[R] for a non-200 answer.
func request[R any](ctx context.Context, hc *http.Client, socket, method, path string, body []byte) (*R, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://vsock-backend"+path, rd)
	if err != nil {
		return nil, fmt.Errorf("failed to make the request %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the vsock backend at %s is unreachable: %w", socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRequestBytes))
	if err != nil {
		return nil, fmt.Errorf("failed to read the answer of the vsock backend at %s to %s %s: %w", socket, method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e errorAnswer[R]
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("%s: %q", resp.Status, bytes.TrimSpace(b))
		}
		return nil, &refusedError[R]{msg: fmt.Sprintf("the vsock backend at %s refused %s %s: %s", socket, method, path, e.Error),
			status: resp.StatusCode, report: e.Report}
	}
	var rep R
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("failed to decode the answer of the vsock backend at %s to %s %s: %w", socket, method, path, err)
	}
	return &rep, nil
}

// Probe asks the server for its status once, without recording it.
// Errors: the server unreachable or not answering a Report.
func (c *Client) Probe(ctx context.Context) error {
	_, err := request[Report](ctx, c.http, c.Socket, http.MethodGet, StatusPath, nil)
	return err
}
