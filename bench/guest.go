package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/bench/netperf"
)

// VM mode with vsock tests: netperf has no AF_VSOCK, so the runner copies
// itself into the guests over SSH, starts `vsock-server` in every server VM
// and runs `vsock-client` in every client VM (GuestVSock). The binary
// is static and needs nothing else in the guest; it must match the guest's
// architecture (the runner image's).

// GuestBinary is where the runner puts itself in a guest of role "client"
// or "server": /tmp/fastpath-bench-<run ID>-<role>.
func (c RunConfig) GuestBinary(role string) string {
	id := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(c.RunID))
	if id == "" {
		id = "run"
	}
	return "/tmp/fastpath-bench-" + id + "-" + role
}

// guestStartTimeout bounds how long a vsock-server may take to listen.
const guestStartTimeout = 15 * time.Second

// ProvisionGuests copies this executable to every client and server VM and
// starts vsock-server in each server VM on VSockServerPort. cleanup
// stops the servers and removes the copies (best effort, logged); call it
// also when err is not nil.
func (c RunConfig) ProvisionGuests(ctx context.Context, log logr.Logger) (cleanup func(), err error) {
	var undo []func(context.Context)
	cleanup = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](ctx)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return cleanup, fmt.Errorf("failed to find the runner's own executable to copy into the guests: %w", err)
	}
	pairs := c.Matrix.MaxPairs()
	type guest struct {
		target SSHGuest
		role   string
	}
	var guests []guest
	for i := 0; i < pairs; i++ {
		guests = append(guests, guest{c.SSHClients[i], "client"}, guest{c.SSHServers[i], "server"})
	}
	for _, g := range guests {
		bin := c.GuestBinary(g.role)
		if err := c.upload(ctx, g.target, self, bin); err != nil {
			return cleanup, err
		}
		undo = append(undo, func(ctx context.Context) { c.guestShell(ctx, log, g.target, "rm -f "+bin) })
		log.Info("Copied the runner into the guest", "guest", g.target.String(), "role", g.role, "path", bin)
		if g.role != "server" {
			continue
		}
		pid, err := c.startVSockServer(ctx, g.target, bin)
		if err != nil {
			return cleanup, err
		}
		undo = append(undo, func(ctx context.Context) {
			c.guestShell(ctx, log, g.target, fmt.Sprintf("kill %d 2>/dev/null; rm -f %s.log", pid, bin))
		})
		log.Info("Started vsock-server in the server VM", "guest", g.target.String(), "port", c.VSockServerPort, "pid", pid)
	}
	return cleanup, nil
}

// upload writes the file at src to path dst in the guest (mode 0755), through
// ssh's stdin.
func (c RunConfig) upload(ctx context.Context, target SSHGuest, src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("failed to open %s to copy it into %s: %w", src, target, err)
	}
	defer f.Close()
	script := fmt.Sprintf("cat > %[1]s.part && chmod 0755 %[1]s.part && mv -f %[1]s.part %[1]s", dst)
	ssh := c.SSH(target)
	cmd := exec.CommandContext(ctx, ssh.Argv[0], append(append([]string(nil), ssh.Argv[1:]...), netperf.ShellJoin([]string{"sh", "-c", script}))...)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr, cmd.WaitDelay = f, &stderr, 5*time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("failed to copy the runner into %s as %s over ssh: %w: %s", target, dst, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// startVSockServer starts bin vsock-server in the background in the guest
// and waits until it logs that it is serving; it returns the server's PID.
func (c RunConfig) startVSockServer(ctx context.Context, target SSHGuest, bin string) (int, error) {
	logFile := bin + ".log"
	script := fmt.Sprintf(`nohup %[1]s vsock-server --port %[2]d </dev/null >%[3]s 2>&1 &
pid=$!
i=0
while [ $i -lt %[4]d ]; do
  if grep -q Serving %[3]s; then echo $pid; exit 0; fi
  if ! kill -0 $pid 2>/dev/null; then cat %[3]s >&2; exit 3; fi
  sleep 0.2; i=$((i+1))
done
cat %[3]s >&2; kill $pid; exit 4`, bin, c.VSockServerPort, logFile, int(guestStartTimeout/(200*time.Millisecond)))
	ctx, cancel := context.WithTimeout(ctx, guestStartTimeout+30*time.Second)
	defer cancel()
	stdout, stderr, err := c.SSH(target).Run(ctx, []string{"sh", "-c", script})
	if err != nil {
		return 0, fmt.Errorf("failed to start vsock-server on port %d in %s: %w: %s", c.VSockServerPort, target, err, strings.TrimSpace(string(stderr)))
	}
	var pid int
	if _, err := fmt.Sscan(string(stdout), &pid); err != nil || pid <= 0 {
		return 0, fmt.Errorf("failed to start vsock-server on port %d in %s: no PID in %q", c.VSockServerPort, target, stdout)
	}
	return pid, nil
}

// guestShell runs a cleanup command in a guest and logs a failure.
func (c RunConfig) guestShell(ctx context.Context, log logr.Logger, target SSHGuest, script string) {
	if _, stderr, err := c.SSH(target).Run(ctx, []string{"sh", "-c", script}); err != nil {
		log.Error(err, "Failed to clean up in the guest", "guest", target.String(), "command", script, "stderr", strings.TrimSpace(string(stderr)))
	}
}
