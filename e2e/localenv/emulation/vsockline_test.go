package emulation

import (
	"context"
	"fmt"
	"testing"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// ServeLines answers each line with the peer's CID; RequestLine returns the
// answer, "" for a peer that closes without one, and an error when nobody
// listens. Over the UNIX-socket vsock transport (no AF_VSOCK here).
func TestServeAndRequestLines(t *testing.T) {
	dir := t.TempDir()
	server := vsock.NewUnixTransport(dir, 3)
	client := vsock.NewUnixTransport(dir, 4)
	ctx := context.Background()

	ln, err := server.Listen(5000)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ServeLines(ln, func(line string, peer uint32) string { return fmt.Sprintf("got %q from CID %d", line, peer) })
	got, err := RequestLine(ctx, client, 3, 5000, "SELECT 1")
	if want := "got \"SELECT 1\" from CID 4\n"; err != nil || got != want {
		t.Errorf("RequestLine = %q, %v; want %q, nil", got, err, want)
	}

	silent, err := server.Listen(5001)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if got, err := RequestLine(ctx, client, 3, 5001, "hello"); err != nil || got != "" {
		t.Errorf("RequestLine to a peer that closes = %q, %v; want \"\", nil", got, err)
	}

	if got, err := RequestLine(ctx, client, 3, 5002, "hello"); err == nil {
		t.Errorf("RequestLine to a port nobody listens on = %q, nil; want an error", got)
	}
}
