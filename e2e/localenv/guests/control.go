package guests

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// controlChannel is the host end of a guest's control channel, the
// virtio-serial port ControlPortName (the UNIX socket QEMU binds): the host
// writes "<id> <base64 command>\n" and the guest (hack/guest/init) answers
// "@@FPOUT <id>\n<output>\n@@FPEND <id> <exit code>\n". The host's ids are
// "c<n>": a suffix of one is never another, so a line that lost its first
// bytes never passes for a command the host sent.
//
// The port has flow control: QEMU takes the host's bytes only into buffers
// the guest posted while it holds the port open, so a busy or booting guest
// delays them and loses none (the 16550 UART this replaced lost ~250 bytes
// of a command line under TCG). Bytes can still go at a reset: what QEMU had
// put in the buffers of a guest kernel that reboots is gone with it. So a
// fresh channel, and one after a reboot, is synchronised first: probes are
// sent until the guest answers one (sync). Once synced, an answer to an id
// the host never sent is an error at once rather than a wait for an answer
// that will not come.
type controlChannel struct {
	w     io.Writer
	label string
	// lines are the guest's complete lines, in order; closed after the
	// read error (readErr) once the connection ends.
	lines   chan string
	mu      sync.Mutex
	readErr error
	recent  []string
	seq     int
}

// recentLines is how many of the guest's last lines are kept for errors.
const recentLines = 20

// newControlChannel reads rw (the connection to the control socket) until
// it fails; closing rw ends the reader.
func newControlChannel(rw io.ReadWriter, label string) *controlChannel {
	c := &controlChannel{w: rw, label: label, lines: make(chan string, 256)}
	go c.read(rw)
	return c
}

func (c *controlChannel) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			c.mu.Lock()
			short := strings.TrimRight(line, "\r\n")
			if len(short) > 200 {
				short = short[:200] + "..."
			}
			c.recent = append(c.recent, short)
			if len(c.recent) > recentLines {
				c.recent = c.recent[len(c.recent)-recentLines:]
			}
			c.mu.Unlock()
			c.lines <- line
		}
		if err != nil {
			c.mu.Lock()
			c.readErr = err
			c.mu.Unlock()
			close(c.lines)
			return
		}
	}
}

// Recent returns the last lines the guest wrote on the channel.
func (c *controlChannel) Recent() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.recent...)
}

func (c *controlChannel) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Errorf("the control channel of %s closed: %w", c.label, c.readErr)
}

// send writes one command under a fresh id and returns the id.
func (c *controlChannel) send(command string) (string, error) {
	c.seq++
	id := "c" + strconv.Itoa(c.seq)
	if _, err := fmt.Fprintf(c.w, "%s %s\n", id, base64.StdEncoding.EncodeToString([]byte(command))); err != nil {
		return id, fmt.Errorf("failed to send command %s to %s: %w", id, c.label, err)
	}
	return id, nil
}

// sent reports whether id is one the host sent on this channel.
func (c *controlChannel) sent(id string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "c"))
	return strings.HasPrefix(id, "c") && err == nil && n >= 1 && n <= c.seq && "c"+strconv.Itoa(n) == id
}

// endID returns the id and exit code of an "@@FPEND <id> <rc>" line.
func endID(trimmed string) (id string, rc int, ok bool) {
	f := strings.Fields(trimmed)
	if len(f) != 3 || f[0] != "@@FPEND" {
		return "", 0, false
	}
	rc, err := strconv.Atoi(f[2])
	if err != nil {
		rc = -1
	}
	return f[1], rc, true
}

// errDesync is wrapped when the guest answers an id the host never sent.
var errDesync = errors.New("the control channel lost bytes")

// sync sends probes (the command `true`) until the guest answers one: at
// once again when the guest answers a mangled id (a probe that lost its
// first bytes), and every resend when no answer comes (a probe lost
// whole). ctx bounds it.
func (c *controlChannel) sync(ctx context.Context, resend time.Duration) error {
	probes := map[string]bool{}
	probe := func() error {
		id, err := c.send("true")
		probes[id] = true
		return err
	}
	if err := probe(); err != nil {
		return err
	}
	timer := time.NewTimer(resend)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited for the guest %s to answer any of %d probe(s) on its control channel: %w", c.label, len(probes), context.Cause(ctx))
		case <-timer.C:
			if err := probe(); err != nil {
				return err
			}
			timer.Reset(resend)
		case line, ok := <-c.lines:
			if !ok {
				return c.closedErr()
			}
			id, _, end := endID(strings.TrimRight(line, "\r\n"))
			switch {
			case !end:
			case probes[id]:
				return nil
			case !c.sent(id):
				if err := probe(); err != nil {
					return err
				}
			}
		}
	}
}

// run sends command and returns its output and exit code. Answers to
// earlier ids (a probe answered late, a command whose wait was given up)
// are skipped; an answer to an id never sent is errDesync. ctx bounds the
// wait; the error says what was waited for.
func (c *controlChannel) run(ctx context.Context, command string) (string, int, error) {
	id, err := c.send(command)
	if err != nil {
		return "", -1, err
	}
	sentAt := time.Now()
	var out strings.Builder
	started := false
	for {
		select {
		case <-ctx.Done():
			begun := "no @@FPOUT " + id + " line yet"
			if started {
				begun = "its @@FPOUT " + id + " line came"
			}
			return out.String(), -1, fmt.Errorf("waited %s for the guest %s to answer command %s %q with an @@FPEND %s line (%s): %w",
				time.Since(sentAt).Round(time.Millisecond), c.label, id, command, id, begun, context.Cause(ctx))
		case line, ok := <-c.lines:
			if !ok {
				return out.String(), -1, fmt.Errorf("failed to read the answer to command %s %q: %w", id, command, c.closedErr())
			}
			trimmed := strings.TrimRight(line, "\r\n")
			if endedID, rc, end := endID(trimmed); end {
				switch {
				case endedID == id:
					return strings.TrimSuffix(out.String(), "\n"), rc, nil
				case !c.sent(endedID):
					return out.String(), -1, fmt.Errorf("failed to run %q in %s: the guest answered id %q, which the host never sent, while the host waited for %s: %w", command, c.label, endedID, id, errDesync)
				}
				continue
			}
			switch {
			case trimmed == "@@FPOUT "+id:
				started = true
			case started:
				out.WriteString(line)
			}
		}
	}
}
