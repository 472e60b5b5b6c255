package relay

import (
	"errors"
	"net"
	"os"
	"time"
)

// UseLegacyCopyLoop makes r copy its non-splice directions with
// legacyBufferCopy, the loop bufferCopy replaced, so that
// BenchmarkRelayCopyPath can time both in one run. Call it before r's first
// Update.
func UseLegacyCopyLoop(r *Relay) { r.copyLoop = (*pipe).legacyBufferCopy }

// legacyBufferCopy is bufferCopy as it was before issue 41: a read deadline
// set before every read of a lent buffer, and the buffer given back after any
// read of less than half of it, so a stream whose reads come back short
// bounces between the small and the lent buffer (a pool Get and Put, two
// gauge updates and two deadline changes per bounce). Kept only to be
// measured against.
func (p *pipe) legacyBufferCopy(dst, src net.Conn, moved func(int)) (rerr, werr error) {
	small := make([]byte, SmallBufferSize)
	var big *[]byte
	giveBack := func() {
		p.l.relay.giveBack(big)
		big = nil
		_ = src.SetReadDeadline(time.Time{})
	}
	defer func() {
		if big != nil {
			giveBack()
		}
	}()
	for {
		buf := small
		if big != nil {
			buf = *big
			_ = src.SetReadDeadline(time.Now().Add(lendQuiet))
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			moved(w)
			if werr != nil {
				return nil, werr
			}
		}
		switch {
		case big != nil && errors.Is(rerr, os.ErrDeadlineExceeded):
			giveBack() // quiet for lendQuiet: wait on the small buffer
			continue
		case big == nil && n == len(small):
			big = p.l.relay.borrow() // nil when the budget is spent: stay small
		case big != nil && n < len(*big)/2:
			giveBack()
		}
		if rerr != nil {
			return rerr, nil
		}
	}
}
