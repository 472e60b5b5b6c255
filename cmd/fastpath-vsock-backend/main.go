// Command fastpath-vsock-backend runs vsock mode Sibling's vhost-device-vsock
// processes and, with --relay, vsock mode Relay's relay for the node agent,
// in a pod of its own (the chart's fastpath-vsock-backend DaemonSet,
// updateStrategy OnDelete), so that an agent rollout leaves them, the
// relay's listeners and the guests' connections alone. It serves
// internal/vsock/backend.Server on a UNIX socket in its socket directory
// (PUT /v1/groups, GET /v1/status; with --relay PUT/GET /v1/relay and the
// relay's Prometheus metrics on GET /metrics); fastpath-agent
// --sibling-backend-socket and --relay-backend-socket drive it. It needs no
// Kubernetes client and no capability (the relay's AF_VSOCK ports are >=
// 1024): it runs as an unprivileged user, in the group of its socket
// directory, which the agent makes (backend.PrepareSocketDir), and nothing
// in it runs as root (docs/security.md, docs/vsock-sibling.md). Nor does the relay's AF_VSOCK
// need the host network: vsock is not network-namespaced before Linux 7.0,
// so the relay reaches the guests from the pod's own namespace, as the
// agent's does from the host's (under 7.0's per-namespace vsock with
// KubeVirt VEP 222 neither does, docs/design.md §4.4).
//
// Modes:
//
//	fastpath-vsock-backend --socket-dir=DIR [--vhost-device-vsock=PATH] [--relay ...]   serve until SIGTERM
//	fastpath-vsock-backend --socket-dir=DIR --probe                        exit 0 when the server answers
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

// options are the command line.
type options struct {
	vhostDeviceVsock string
	socketDir        string
	controlSocket    string
	probe            bool
	relay            relayOptions
}

func main() {
	o := options{}
	flag.StringVar(&o.vhostDeviceVsock, "vhost-device-vsock", "/usr/local/bin/vhost-device-vsock", "Path of vhost-device-vsock (v0.3.0) for vsock mode Sibling; never run with --forward-cid or --forward-listen. \"\": no Sibling groups (PUT /v1/groups answers 404), e.g. a relay-only backend.")
	flag.StringVar(&o.socketDir, "socket-dir", "", "Directory of the vhost-user and hybrid-vsock sockets and of the control socket, at the same path as in the agent (required). Every socket a client names must be directly in it.")
	flag.StringVar(&o.controlSocket, "control-socket", "", "The server's UNIX socket (default <socket-dir>/"+backend.ControlSocketName+"); the agent's --sibling-backend-socket.")
	flag.BoolVar(&o.probe, "probe", false, "Ask the server on --control-socket for its status and exit 0 when it answers (the exec probe).")
	o.relay.addFlags(flag.CommandLine)
	flag.Parse()
	log := logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(o, log); err != nil {
		log.Error(err, "fastpath-vsock-backend failed")
		os.Exit(1)
	}
}

func run(o options, log logr.Logger) error {
	if o.socketDir == "" || !filepath.IsAbs(o.socketDir) {
		return fmt.Errorf("--socket-dir %q must be an absolute path", o.socketDir)
	}
	o.socketDir = filepath.Clean(o.socketDir)
	if o.controlSocket == "" {
		o.controlSocket = filepath.Join(o.socketDir, backend.ControlSocketName)
	}
	if err := o.relay.validate(); err != nil {
		return err
	}
	if o.probe {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c := backend.NewClient(o.controlSocket)
		return c.Probe(ctx)
	}
	return serve(o, log)
}

// serve runs the Supervisor (with --vhost-device-vsock) and the relay
// (with --relay) behind the server until SIGTERM or SIGINT, then stops
// every vhost-device-vsock (removing their sockets) and closes the relay
// (every relayed connection ends at once).
func serve(o options, log logr.Logger) error {
	if os.Geteuid() == 0 {
		return errors.New("refusing to run as root: the guest-facing vhost-device-vsock runs as an unprivileged user (runAsUser)")
	}
	if o.vhostDeviceVsock == "" && !o.relay.enabled {
		return errors.New("nothing to serve: --vhost-device-vsock is \"\" and --relay is off")
	}
	syscall.Umask(backend.SocketUmask)
	if err := backend.EnsureSocketDir(o.socketDir); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var syncer backend.Syncer // nil interface without Sibling
	var sup *backend.Supervisor
	version := ""
	if o.vhostDeviceVsock != "" {
		var err error
		if version, err = backend.Version(ctx, o.vhostDeviceVsock); err != nil {
			return fmt.Errorf("failed to start: --vhost-device-vsock: %w", err)
		}
		sup = &backend.Supervisor{Binary: o.vhostDeviceVsock}
		defer sup.Stop()
		syncer = sup
	}
	srv, err := backend.NewServer(syncer, version)
	if err != nil {
		return err
	}
	srv.SocketDir, srv.Log = o.socketDir, log
	if o.relay.enabled {
		rl, metrics, note, err := newRelay(o.relay, log)
		if err != nil {
			return fmt.Errorf("failed to start the vsock relay: %w", err)
		}
		defer rl.Close() // Serve closes it too
		srv.Relay, srv.RelayEmulation, srv.Metrics = rl, note, metrics
	}
	log.Info("Starting the vsock backend", "vhostDeviceVsock", o.vhostDeviceVsock, "version", version, "relay", o.relay.enabled,
		"socketDir", o.socketDir, "uid", os.Geteuid(), "gid", os.Getegid())
	err = srv.Serve(ctx, o.controlSocket, 0o660)
	groups := 0
	if sup != nil {
		groups = len(sup.Status())
	}
	log.Info("Stopping the vsock backend: its vhost-device-vsock processes and its relay", "groups", groups)
	return err
}
