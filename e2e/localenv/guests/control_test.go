package guests

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGuest is the guest end of the control channel as hack/guest/init
// serves it (`read -r id b64`, run, answer), behind a serial port that
// lost what the host wrote before the guest opened it: the first drop
// bytes, or the first line whole (dropLine).
type fakeGuest struct {
	conn     net.Conn
	drop     int
	dropLine bool

	mu  sync.Mutex
	ran []string
}

func startFakeGuest(t *testing.T, drop int, dropLine bool) (*controlChannel, *fakeGuest) {
	t.Helper()
	host, guest := net.Pipe()
	f := &fakeGuest{conn: guest, drop: drop, dropLine: dropLine}
	done := make(chan struct{})
	go func() { defer close(done); f.serve() }()
	t.Cleanup(func() { _ = host.Close(); _ = guest.Close(); <-done })
	return newControlChannel(host, "fake/guest"), f
}

func (f *fakeGuest) serve() {
	r := bufio.NewReader(f.conn)
	for range f.drop {
		if _, err := r.ReadByte(); err != nil {
			return
		}
	}
	if f.dropLine {
		if _, err := r.ReadString('\n'); err != nil {
			return
		}
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		id := fields[0]
		command, err := base64.StdEncoding.DecodeString(strings.Join(fields[1:], " "))
		if err != nil {
			command = nil // base64 -d 2>/dev/null: the guest runs nothing
		}
		f.mu.Lock()
		f.ran = append(f.ran, string(command))
		f.mu.Unlock()
		out, rc := "", 0
		if c := string(command); c != "" && c != "true" {
			out, rc = "ran: "+c+"\n", 3
		}
		if _, err := fmt.Fprintf(f.conn, "@@FPOUT %s\n%s\n@@FPEND %s %d\n", id, out, id, rc); err != nil {
			return
		}
	}
}

func (f *fakeGuest) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ran...)
}

const ipAddrAdd = "ip addr add 10.252.0.3/24 dev eth0"

// TestControlChannelSyncsBeforeTheFirstCommand: the serial port lost the
// start of what the host wrote before the guest opened it (issue 26: the
// first command of a guest, `ip addr add`, went unanswered for the whole
// deadline). The probes resynchronise the channel, the first command is
// answered, and the guest never runs anything the host did not send.
func TestControlChannelSyncsBeforeTheFirstCommand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		drop     int
		dropLine bool
		resend   time.Duration
	}{
		{name: "nothing lost", resend: time.Hour},
		// The answer to a mangled id asks for the next probe at once: no
		// timer is involved (an hour never passes here).
		{name: "the id's first byte lost", drop: 1, resend: time.Hour},
		{name: "the id lost", drop: 2, resend: time.Hour},
		{name: "the id and part of the command lost", drop: 5, resend: time.Hour},
		// A probe lost whole is answered by nothing: the resend timer
		// sends the next.
		{name: "the first line lost", dropLine: true, resend: time.Millisecond},
		{name: "all but the newline lost", drop: len("c1 dHJ1ZQ=="), resend: time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, guest := startFakeGuest(t, tc.drop, tc.dropLine)
			ctx := context.Background()
			if err := ch.sync(ctx, tc.resend); err != nil {
				t.Fatalf("sync: %v", err)
			}
			out, rc, err := ch.run(ctx, ipAddrAdd)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if out != "ran: "+ipAddrAdd+"\n" || rc != 3 {
				t.Fatalf("run = %q, %d; want the command's output and exit code 3", out, rc)
			}
			for _, c := range guest.commands() {
				if c != "" && c != "true" && c != ipAddrAdd {
					t.Errorf("the guest ran %q, which the host never sent", c)
				}
			}
		})
	}
}

// TestControlChannelAnswerToAnUnsentIDIsAnError: without the sync, a
// command that lost its first byte is answered under a mangled id; the
// host says so at once instead of waiting out its deadline for its own id.
func TestControlChannelAnswerToAnUnsentIDIsAnError(t *testing.T) {
	ch, _ := startFakeGuest(t, 1, false)
	_, _, err := ch.run(context.Background(), ipAddrAdd)
	if !errors.Is(err, errDesync) {
		t.Fatalf("run = %v; want %v", err, errDesync)
	}
	if !strings.Contains(err.Error(), "waited for c1") {
		t.Errorf("the error does not say what was waited for: %v", err)
	}
}

// TestControlChannelSkipsLateAnswers: an answer to an earlier id (a probe
// answered after another, a command whose wait was given up) is not taken
// for the current command's.
func TestControlChannelSkipsLateAnswers(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	defer guest.Close()
	ch := newControlChannel(host, "fake/guest")
	r := bufio.NewReader(guest)
	go func() {
		// c1 is answered only after c2 arrived, then c2.
		for range 2 {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
		_, _ = fmt.Fprint(guest, "@@FPOUT c1\nold\n\n@@FPEND c1 0\n@@FPOUT c2\nnew\n\n@@FPEND c2 0\n")
	}()
	if _, err := ch.send("sleep 1"); err != nil { // c1, its wait given up
		t.Fatal(err)
	}
	out, rc, err := ch.run(context.Background(), "echo new")
	if err != nil || rc != 0 || out != "new\n" {
		t.Fatalf("run = %q, %d, %v; want the answer to c2", out, rc, err)
	}
}

// TestControlChannelWaitSaysWhatItWaitedFor: a guest that never answers
// gives up with the command, its id and the cause.
func TestControlChannelWaitSaysWhatItWaitedFor(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	defer guest.Close()
	go func() { _, _ = bufio.NewReader(guest).ReadString('\n') }() // read, never answered
	ch := newControlChannel(host, "fake/guest")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the test gave up"))
	_, _, err := ch.run(ctx, ipAddrAdd)
	if err == nil {
		t.Fatal("run of an unanswered command succeeded")
	}
	for _, want := range []string{"fake/guest", "c1", ipAddrAdd, "@@FPEND c1", "the test gave up"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q lacks %q", err, want)
		}
	}
}
