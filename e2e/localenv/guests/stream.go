package guests

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Stream sizes and limits.
const (
	// StreamBytes is what one stream transfer moves: 2 MiB, 8 times the
	// guest's default vsock receive buffer (buf_alloc, 256 KiB), so a path
	// that loses credit stalls instead of finishing inside the first window,
	// and the connection's setup is a small part of the time.
	StreamBytes = 2 << 20
	// UnpatchedSiblingWriteBytes is the largest write the unpatched
	// vhost-device-vsock 0.3.0 carried between sibling guests of the
	// real-guest kernel (Debian 6.1): 3776-byte RX buffers
	// (SKB_WITH_OVERHEAD(4096), header included) minus the 44-byte packet
	// header. It copied a sibling's packet whole into one RX buffer, so
	// longer writes were dropped. Our patch (hack/vhost-device-vsock/0001)
	// splits such packets across buffers; the tests send writes one byte
	// longer and expect every byte (docs/vsock-sibling.md).
	UnpatchedSiblingWriteBytes = 3732
)

// StreamPath is one way from a client guest to a sink: the guest that
// sends, and the socat address it dials (e.g. "VSOCK-CONNECT:3:5001",
// "TCP:10.0.0.2:5002").
type StreamPath struct {
	// Name is how results call the path, e.g. "vsock-sibling".
	Name string
	// From is the sending guest.
	From *Guest
	// Target is the socat address From dials.
	Target string
}

// StreamSample is one transfer: Bytes moved in writes of WriteBytes, and
// the time from before the connection to the sink's answer, measured
// inside the sending guest.
type StreamSample struct {
	Path       string
	WriteBytes int
	// Round counts from 1; every path runs once per round, in order.
	Round   int
	Bytes   int
	Elapsed time.Duration
	// Mbps is Bytes*8 / Elapsed in 10^6 bit/s.
	Mbps float64
}

// ServeSink starts a socat sink in g, and returns once it listens: every
// connection to listen (a socat listen address such as "VSOCK-LISTEN:5001"
// or "TCP-LISTEN:5002,bind=10.0.0.2") is read until total bytes arrived, and
// then answered with the count it read, so the sender knows when the last
// byte arrived. The count of every connection (also a short one, when the
// sender gave up) is appended to /tmp/fpsink.<name> in the guest.
func (g *Guest) ServeSink(ctx context.Context, name, listen string, total int) error {
	if total <= 0 {
		return fmt.Errorf("failed to start the sink %s in %s: total must be positive, got %d", name, g.Name, total)
	}
	cmd := fmt.Sprintf("/usr/bin/socat -d -d -b 65536 %s,fork,reuseaddr SYSTEM:'head -c %d | wc -c | tee -a /tmp/fpsink.%s' >/dev/null 2>/tmp/fpsink.%s.log &\n%s",
		listen, total, name, name, WaitListening("/tmp/fpsink."+name+".log"))
	out, rc, err := g.Run(ctx, cmd)
	if err == nil && rc != 0 {
		err = fmt.Errorf("exit %d: %s", rc, strings.TrimSpace(out))
	}
	if err != nil {
		return fmt.Errorf("failed to start the sink %s in %s: %w", name, g.Name, err)
	}
	return nil
}

// WaitListening is shell that waits until the socat started in the
// background with -d -d and its stderr in log has announced "listening on"
// (at most 20 s; then it prints the log and exits 1). A sink's command
// returns only then: answered at once, a sender dialling right after could
// reach the port before socat has bound it (a TCG guest takes hundreds of
// milliseconds to start socat) and be reset.
func WaitListening(log string) string {
	return fmt.Sprintf(`i=0; while ! grep -q "listening on" %[1]s 2>/dev/null; do i=$((i + 1)); if [ $i -ge 200 ]; then echo "socat did not listen within 20s:"; cat %[1]s; exit 1; fi; sleep 0.1; done`, log)
}

// SinkCounts returns the byte counts the sink name in g recorded, one per
// connection, oldest first.
func (g *Guest) SinkCounts(ctx context.Context, name string) ([]int, error) {
	out, _, err := g.Run(ctx, "cat /tmp/fpsink."+name+" 2>/dev/null")
	if err != nil {
		return nil, err
	}
	var counts []int
	for _, f := range strings.Fields(out) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("malformed count %q in /tmp/fpsink.%s of %s", f, name, g.Name)
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// guestNow is a shell function printing the guest's time since boot in
// nanoseconds: busybox date has no %N, and /proc/timer_list's first "now
// at <ns> nsecs" line is CLOCK_MONOTONIC in ns. Should that read give
// nothing, /proc/uptime (the same clock plus suspend time, which a guest
// here never has, in 10 ms steps) stands in.
const guestNow = `now() { t=$(sed -n '/^now at /{s/^now at \([0-9]*\) nsecs.*/\1/p;q}' /proc/timer_list 2>/dev/null); [ -n "$t" ] || t=$(awk '{printf "%.0f", $1*1e9}' /proc/uptime); echo "$t"; }`

// ErrStreamStalled is wrapped by Stream when the sink did not answer
// within the stall limit: the transfer stopped.
var ErrStreamStalled = errors.New("the stream stalled")

// Stream sends total zero bytes from g to target (a socat address) in
// writes of writeBytes (dd into socat -b; a last, shorter write when
// writeBytes does not divide total) and waits for the sink (ServeSink) to
// answer. Elapsed runs from before the connection to the answer, measured
// inside g. Errors: a write size or total below 1, a sink that counted
// other than total, and ErrStreamStalled when no answer came within stall
// (the sender is killed then).
func (g *Guest) Stream(ctx context.Context, target string, total, writeBytes int, stall time.Duration) (StreamSample, error) {
	if writeBytes < 1 || total < 1 {
		return StreamSample{}, fmt.Errorf("failed to stream from %s: writeBytes and total must be at least 1, got %d and %d", g.Name, writeBytes, total)
	}
	secs := int(stall.Seconds())
	if secs < 1 {
		secs = 1
	}
	q, r := total/writeBytes, total%writeBytes
	src := fmt.Sprintf("dd if=/dev/zero bs=%d count=%d 2>/dev/null", writeBytes, q)
	if r > 0 {
		src = fmt.Sprintf("{ %s; dd if=/dev/zero bs=%d count=1 2>/dev/null; }", src, r)
	}
	cmd := fmt.Sprintf("%s\ns=$(now); %s | timeout -s KILL %d /usr/bin/socat -b %d -t %d - %s | { read n; e=$(now); echo \"FPSTREAM ${n:-none} ${s:-none} ${e:-none}\"; }",
		guestNow, src, secs, writeBytes, secs, target)
	out, _, err := g.Run(ctx, cmd)
	if err != nil {
		return StreamSample{}, err
	}
	line := lastLine(out, "FPSTREAM ")
	f := strings.Fields(line)
	if len(f) != 4 {
		return StreamSample{}, fmt.Errorf("failed to stream from %s to %s: no result line in %q", g.Name, target, out)
	}
	if f[1] == "none" {
		return StreamSample{}, fmt.Errorf("failed to stream %d bytes in %d-byte writes from %s to %s: the sink did not answer within %ds: %w", total, writeBytes, g.Name, target, secs, ErrStreamStalled)
	}
	n, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseInt(f[2], 10, 64)
	end, err3 := strconv.ParseInt(f[3], 10, 64)
	ns := end - start
	if err1 != nil || err2 != nil || err3 != nil || ns <= 0 {
		return StreamSample{}, fmt.Errorf("failed to stream from %s to %s: malformed result %q (FPSTREAM <count> <start ns> <end ns>; output %q)", g.Name, target, line, out)
	}
	if n != total {
		return StreamSample{}, fmt.Errorf("failed to stream from %s to %s: the sink counted %d bytes, %d were sent", g.Name, target, n, total)
	}
	el := time.Duration(ns)
	return StreamSample{WriteBytes: writeBytes, Bytes: n, Elapsed: el, Mbps: float64(n) * 8 / el.Seconds() / 1e6}, nil
}

// CompareStreams measures every path at every write size: for each size,
// rounds rounds, each running every path once in order, so the paths
// alternate and share the machine's load alike. Each transfer moves total
// bytes (see Stream). It returns every sample; the first failed transfer
// ends it with an error naming path and size. logf (nil: silent) gets one
// line per sample.
func CompareStreams(ctx context.Context, paths []StreamPath, writeSizes []int, total, rounds int, stall time.Duration, logf func(string, ...any)) ([]StreamSample, error) {
	var out []StreamSample
	for _, size := range writeSizes {
		for round := 1; round <= rounds; round++ {
			for _, p := range paths {
				s, err := p.From.Stream(ctx, p.Target, total, size, stall)
				if err != nil {
					return out, fmt.Errorf("path %s, %d-byte writes, round %d: %w", p.Name, size, round, err)
				}
				s.Path, s.Round = p.Name, round
				out = append(out, s)
				if logf != nil {
					logf("%s: %d-byte writes, round %d: %d bytes in %s = %.1f Mbit/s", p.Name, size, round, s.Bytes, s.Elapsed.Round(time.Millisecond), s.Mbps)
				}
			}
		}
	}
	return out, nil
}

// ProbeWrites sends count writes of writeBytes zero bytes from `from` to
// target, closes the connection without waiting for an answer, and returns
// what the sink sinkName in sink (ServeSink, with a total above
// count*writeBytes) read before the connection ended. Kept within the
// receiver's first credit window (256 KiB), the writes never wait for the
// receiver, so a path that drops packets shows it as received < sent
// instead of stalling. Errors: a sink that recorded nothing within 20 s.
func ProbeWrites(ctx context.Context, from *Guest, target string, sink *Guest, sinkName string, writeBytes, count int) (sent, received int, err error) {
	before, err := sink.SinkCounts(ctx, sinkName)
	if err != nil {
		return 0, 0, err
	}
	cmd := fmt.Sprintf("dd if=/dev/zero bs=%d count=%d 2>/dev/null | timeout -s KILL 20 /usr/bin/socat -u -b %d - %s", writeBytes, count, writeBytes, target)
	if out, rc, err := from.Run(ctx, cmd); err != nil || rc != 0 {
		return 0, 0, fmt.Errorf("failed to send %d %d-byte writes from %s to %s (rc %d, %v): %s", count, writeBytes, from.Name, target, rc, err, strings.TrimSpace(out))
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		counts, err := sink.SinkCounts(ctx, sinkName)
		if err != nil {
			return 0, 0, err
		}
		if len(counts) > len(before) {
			return count * writeBytes, counts[len(counts)-1], nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("the sink %s in %s recorded no connection from %s within 20s", sinkName, sink.Name, from.Name)
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("gave up waiting for the sink %s in %s to record the connection from %s: %w", sinkName, sink.Name, from.Name, context.Cause(ctx))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// lastLine returns the last line of s that starts with prefix, trimmed.
func lastLine(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// ChecksumSample is one transfer of random bytes whose sha256 was computed
// in both guests: by the sender over what it wrote, by the sink over what
// it read.
type ChecksumSample struct {
	// Bytes is what the sender wrote; ReceivedBytes what the sink read.
	Bytes, ReceivedBytes int
	// SentSHA256 and ReceivedSHA256 are hex digests.
	SentSHA256, ReceivedSHA256 string
	// Elapsed runs from before the connection to the sink's answer,
	// measured inside the sender; Mbps is Bytes*8 / Elapsed in 10^6 bit/s.
	Elapsed time.Duration
	Mbps    float64
}

// Match reports whether the sink read every byte and its digest is the
// sender's.
func (s ChecksumSample) Match() bool {
	return s.ReceivedBytes == s.Bytes && s.SentSHA256 != "" && s.ReceivedSHA256 == s.SentSHA256
}

// ServeChecksumSink starts a socat sink in g, and returns once it listens,
// that reads every connection to listen (a socat listen address) to its
// end, through tee into a FIFO counted by wc and into sha256sum, so nothing
// is kept in guest memory, and answers "<sha256> <bytes>" on the connection; the same line is appended
// to /tmp/fpsum.<name> in the guest. While a connection is read,
// /tmp/fpsum.<name>.pid holds its sha256sum's PID (SinkProgress). One
// connection at a time per name.
func (g *Guest) ServeChecksumSink(ctx context.Context, name, listen string) error {
	out, rc, err := g.Run(ctx, checksumSinkCommand(name, listen))
	if err == nil && rc != 0 {
		err = fmt.Errorf("exit %d: %s", rc, strings.TrimSpace(out))
	}
	if err != nil {
		return fmt.Errorf("failed to start the checksum sink %s in %s: %w", name, g.Name, err)
	}
	return nil
}

// checksumSinkCommand is the shell command of ServeChecksumSink: it writes
// the per-connection script /tmp/fpsum.<name>.sh and starts socat in the
// background.
func checksumSinkCommand(name, listen string) string {
	f := "/tmp/fpsum." + name
	// A non-interactive sh gives a background job /dev/null as stdin: the
	// connection is kept on fd 4 for tee. socat's -t 60 gives the script a
	// minute after the sender's EOF to answer (the default 0.5 s is short
	// for a TCG guest under load); socat ends as soon as the script does.
	script := fmt.Sprintf(`f=%[1]s.$$
mkfifo $f || exit 1
exec 4<&0
wc -c <$f >$f.n &
tee $f <&4 | sha256sum >$f.s &
echo $! >%[1]s.pid
wait
r="$(cut -d' ' -f1 $f.s) $(cat $f.n)"
rm -f $f $f.s $f.n %[1]s.pid
echo "$r" >>%[1]s
echo "$r"
`, f)
	return fmt.Sprintf("cat >%[1]s.sh <<'FPEOF'\n%[2]sFPEOF\n/usr/bin/socat -d -d -b 65536 -t 60 %[3]s,fork,reuseaddr SYSTEM:'sh %[1]s.sh' >/dev/null 2>%[1]s.log &\n%[4]s", f, script, listen, WaitListening(f+".log"))
}

// SinkProgress returns how many bytes the checksum sink name in g has read
// of the connection it is reading now (its sha256sum's rchar in
// /proc/<pid>/io), 0 when it reads none.
func (g *Guest) SinkProgress(ctx context.Context, name string) (int64, error) {
	out, _, err := g.Run(ctx, fmt.Sprintf(`p=$(cat /tmp/fpsum.%s.pid 2>/dev/null) && awk '$1 == "rchar:" {print $2}' /proc/$p/io 2>/dev/null`, name))
	if err != nil {
		return 0, err
	}
	out = strings.TrimSpace(out)
	if out == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed progress %q of the checksum sink %s in %s", out, name, g.Name)
	}
	return n, nil
}

// StreamChecksum sends total bytes of /dev/urandom from g to target (a
// socat address of a ServeChecksumSink) through dd (writeBytes per read of
// /dev/urandom), tee into a FIFO read by sha256sum, and socat -b
// writeBytes (so socat writes at most writeBytes at a time), and waits for
// the sink's answer. Nothing of the stream is kept in guest memory. within
// bounds the whole transfer inside the guest (socat is killed then); idle
// (0: none) ends it sooner, when nothing has moved for that long (see
// checksumStreamCommand). Errors: total not a positive multiple of
// writeBytes; a transfer that produced no answer is a *NoAnswerError
// (wrapping ErrStreamStalled) that says how it ended; a sample whose
// digests differ is returned without error (ChecksumSample.Match).
func (g *Guest) StreamChecksum(ctx context.Context, target string, total, writeBytes int, within, idle time.Duration) (ChecksumSample, error) {
	if writeBytes < 1 || total < 1 || total%writeBytes != 0 {
		return ChecksumSample{}, fmt.Errorf("failed to stream from %s: total %d must be a positive multiple of writeBytes %d", g.Name, total, writeBytes)
	}
	secs := max(int(within.Seconds()), 1)
	idleSecs := 0
	if idle > 0 {
		idleSecs = max(int(idle.Seconds()), 1)
	}
	out, _, err := g.Run(ctx, checksumStreamCommand(target, total, writeBytes, secs, idleSecs))
	if err != nil {
		return ChecksumSample{}, err
	}
	return parseChecksumStream(out, g.Name, target, total, writeBytes, secs)
}

// checksumStreamCommand is the shell command of StreamChecksum; it prints
// "FPSUM <sink's sha256|none> <sink's count|none> <start ns> <end ns>",
// "FPSENT <sender's sha256>", "FPRC <socat's exit status>", "FPIDLE
// <seconds|empty>" and "FPERR <socat's messages>".
//
// idleSecs > 0 adds a watchdog: once a second it reads how far the
// sender's sha256sum has read (rchar in /proc/<pid>/io; tee feeds it and
// socat in step, so it stops when socat stops taking bytes), and after
// idleSecs checks without progress it sends socat SIGTERM and prints
// FPIDLE. socat's own timeouts cannot do this: -T acts only while socat
// waits in select, and a socat blocked in a write that waits for the vsock
// peer's credit stays there (SO_SNDTIMEO does not help: socat retries a
// write that failed with EAGAIN, every second, for ever).
func checksumStreamCommand(target string, total, writeBytes, secs, idleSecs int) string {
	watchdog := ""
	if idleSecs > 0 {
		watchdog = fmt.Sprintf(`( l=; n=0; while kill -0 $h 2>/dev/null; do r=$(awk '$1 == "rchar:" {print $2}' /proc/$h/io 2>/dev/null); if [ "$r" = "$l" ]; then n=$((n + 1)); else n=0; l=$r; fi; if [ $n -ge %d ]; then echo $n >$f.idle; kill $(cat $f.p 2>/dev/null) 2>/dev/null; exit; fi; sleep 1; done ) &
`, idleSecs)
	}
	return fmt.Sprintf(`%s
f=/tmp/fpsend.$$
mkfifo $f || exit 1
sha256sum <$f >$f.s &
h=$!
%ss=$(now); dd if=/dev/urandom bs=%d count=%d 2>/dev/null | tee $f | { sh -c "echo \$\$ >$f.p; exec timeout -s KILL %d /usr/bin/socat -b %d -t %d - %s" 2>$f.e; echo $? >$f.rc; } | { read sum n; e=$(now); echo "FPSUM ${sum:-none} ${n:-none} ${s:-none} ${e:-none}"; }
wait
echo "FPSENT $(cut -d' ' -f1 $f.s)"
echo "FPRC $(cat $f.rc)"
echo "FPIDLE $(cat $f.idle 2>/dev/null)"
echo "FPERR $(head -c 400 $f.e | tr '\n' ' ')"
rm -f $f $f.s $f.e $f.rc $f.p $f.idle`, guestNow, watchdog, writeBytes, total/writeBytes, secs, writeBytes, secs, target)
}

// NoAnswerError is StreamChecksum's error when the sink did not answer: the
// stream ended without the sink's sha256 and count.
type NoAnswerError struct {
	From, Target      string
	Total, WriteBytes int
	// BoundSecs is the bound on the whole transfer (socat is killed then).
	BoundSecs int
	// RC is socat's exit status (-1 when unknown): 137 when the bound killed
	// it, 1 after an error it printed.
	RC int
	// IdleSecs is set when the idle watchdog ended the stream: the seconds
	// without progress.
	IdleSecs int
	// Socat is what socat wrote on stderr (at most 400 bytes).
	Socat string
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("failed to stream %d bytes in %d-byte writes from %s to %s: the sink did not answer (%s; socat exit %d, idle %ds, killed at %ds if still running, said %q): %s",
		e.Total, e.WriteBytes, e.From, e.Target, e.Ending(), e.RC, e.IdleSecs, e.BoundSecs, e.Socat, ErrStreamStalled)
}

// Unwrap makes a NoAnswerError an ErrStreamStalled.
func (e *NoAnswerError) Unwrap() error { return ErrStreamStalled }

// Stream endings that Ending reports.
const (
	// EndReset: the peer reset the connection (EPIPE or ECONNRESET).
	EndReset = "reset by the peer"
	// EndIdle: nothing moved for the idle bound; the watchdog ended it.
	EndIdle = "idle"
	// EndKilled: the bound on the whole transfer killed socat.
	EndKilled = "killed at the bound"
	// EndOther is any other end.
	EndOther = "other"
)

// Ending says how the stream ended, from socat's exit status and messages.
func (e *NoAnswerError) Ending() string {
	switch {
	case e.IdleSecs > 0:
		return EndIdle
	case e.RC == 137:
		return EndKilled
	case strings.Contains(e.Socat, "Broken pipe") || strings.Contains(e.Socat, "Connection reset"):
		return EndReset
	}
	return EndOther
}

// parseChecksumStream reads the output of checksumStreamCommand.
func parseChecksumStream(out, from, target string, total, writeBytes, secs int) (ChecksumSample, error) {
	res, sent, socatErr := strings.Fields(lastLine(out, "FPSUM ")), strings.Fields(lastLine(out, "FPSENT ")), strings.TrimSpace(strings.TrimPrefix(lastLine(out, "FPERR"), "FPERR"))
	if len(res) != 5 || len(sent) != 2 {
		return ChecksumSample{}, fmt.Errorf("failed to stream from %s to %s: no result lines in %q", from, target, out)
	}
	if res[1] == "none" || res[2] == "none" {
		rc, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(lastLine(out, "FPRC"), "FPRC")))
		if err != nil {
			rc = -1
		}
		idle, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(lastLine(out, "FPIDLE"), "FPIDLE")))
		return ChecksumSample{}, &NoAnswerError{From: from, Target: target, Total: total, WriteBytes: writeBytes, BoundSecs: secs, RC: rc, IdleSecs: idle, Socat: socatErr}
	}
	n, err1 := strconv.Atoi(res[2])
	start, err2 := strconv.ParseInt(res[3], 10, 64)
	end, err3 := strconv.ParseInt(res[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || end <= start {
		return ChecksumSample{}, fmt.Errorf("failed to stream from %s to %s: malformed result %q (FPSUM <sha256> <count> <start ns> <end ns>; output %q)", from, target, lastLine(out, "FPSUM "), out)
	}
	el := time.Duration(end - start)
	return ChecksumSample{Bytes: total, ReceivedBytes: n, SentSHA256: sent[1], ReceivedSHA256: res[1], Elapsed: el,
		Mbps: float64(total) * 8 / el.Seconds() / 1e6}, nil
}
