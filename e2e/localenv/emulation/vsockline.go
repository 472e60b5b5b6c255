package emulation

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// lineTimeout bounds one ServeLines or RequestLine exchange.
const lineTimeout = 10 * time.Second

// ServeLines is an EMULATED guest's vsock service: for every connection
// accepted on ln (a vsock.Transport listener) it reads one line and writes
// back reply(line, peer) and a newline, where line has no trailing newline
// and peer is the connecting CID (the relay's, vsock.HostCID, when the
// connection came through the node agent; 0 if the transport cannot tell).
// It returns at once and serves until ln is closed.
func ServeLines(ln net.Listener, reply func(line string, peer uint32) string) {
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(lineTimeout))
				line, _ := bufio.NewReader(conn).ReadString('\n')
				peer, _ := vsock.PeerCID(conn)
				fmt.Fprintln(conn, reply(strings.TrimSpace(line), peer))
			}()
		}
	}()
}

// RequestLine is an EMULATED guest's vsock client: it dials (cid, port)
// over t, sends msg and a newline, half-closes and returns everything the
// peer sends back. A peer that closes without answering, as the relay does
// for a CID it does not allow, gives "" and a nil error; a failed dial is an
// error. The whole exchange is bounded by 10 s.
func RequestLine(ctx context.Context, t vsock.Transport, cid, port uint32, msg string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, lineTimeout)
	defer cancel()
	conn, err := t.Dial(ctx, cid, port)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(lineTimeout))
	if _, err := fmt.Fprintln(conn, msg); err != nil {
		return "", nil // closed by the peer before we wrote
	}
	_ = vsock.CloseWrite(conn)
	b, err := io.ReadAll(conn)
	if err != nil && len(b) == 0 {
		return "", nil
	}
	return string(b), nil
}
