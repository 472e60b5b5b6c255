package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// Environment variables that set the defaults of --transport and --cid.
// The emulation's ssh (e2e/localenv/emulation) sets them in every
// command it runs in an emulated guest, so a runner that copied itself into
// a guest (VM mode) uses that guest's emulated vsock there and real AF_VSOCK
// in a real guest.
const (
	VSockTransportEnv = "FASTPATH_VSOCK_TRANSPORT"
	VSockCIDEnv       = "FASTPATH_VSOCK_CID"
)

const unixTransportPrefix = "unix:"

// TransportOptions select the vsock transport of the VSOCK_* tests: real
// AF_VSOCK ("vsock"), or the EMULATION over UNIX sockets
// (internal/vsock.UnixTransport, "unix:<dir>" with a CID) for machines
// without vhost-vsock and for tests.
type TransportOptions struct {
	// Spec is "vsock" or "unix:<dir>".
	Spec string
	// CID is this end's emulated context ID (1 to vsock.AnyCID-1) with
	// unix:<dir>; 0 with real AF_VSOCK, which takes it from the kernel.
	CID uint
}

// AddFlags registers --transport and --cid on fs; what says what the
// transport is for. Defaults come from $FASTPATH_VSOCK_TRANSPORT (else
// "vsock") and $FASTPATH_VSOCK_CID.
func (t *TransportOptions) AddFlags(fs *pflag.FlagSet, what string) {
	spec := "vsock"
	if v := os.Getenv(VSockTransportEnv); v != "" {
		spec = v
	}
	var cid uint64
	if v := os.Getenv(VSockCIDEnv); v != "" {
		cid, _ = strconv.ParseUint(v, 10, 32) // Validate rejects a bad value as a missing --cid
	}
	fs.StringVar(&t.Spec, "transport", spec, what+": vsock (real AF_VSOCK sockets) or unix:<dir> (an EMULATION of vsock over UNIX sockets under <dir>, one directory per CID); default $"+VSockTransportEnv+", else vsock")
	fs.UintVar(&t.CID, "cid", uint(cid), "with --transport unix:<dir>: the emulated context ID of this end (real AF_VSOCK takes it from the kernel); default $"+VSockCIDEnv)
}

func (t TransportOptions) unixDir() (string, bool) {
	return strings.CutPrefix(t.Spec, unixTransportPrefix)
}

// Validate checks the spec and that a CID is given exactly when the
// transport is emulated; errors name the flag.
func (t TransportOptions) Validate() error {
	dir, emulated := t.unixDir()
	switch {
	case emulated && dir == "":
		return fmt.Errorf("failed to parse --transport %q: unix: needs a directory", t.Spec)
	case emulated && (t.CID == 0 || t.CID >= uint(vsock.AnyCID)):
		return fmt.Errorf("--transport %s needs --cid, this end's emulated context ID (1-%d)", t.Spec, vsock.AnyCID-1)
	case !emulated && t.Spec != "vsock":
		return fmt.Errorf("failed to parse --transport %q: want vsock or unix:<dir>", t.Spec)
	case !emulated && t.CID != 0:
		return fmt.Errorf("--cid applies to --transport unix:<dir> only: AF_VSOCK takes the context ID from the kernel")
	}
	return nil
}

// Transport returns the selected transport; call Validate first. Nothing
// is opened here: AF_VSOCK sockets are only made by Listen and Dial.
func (t TransportOptions) Transport() vsock.Transport {
	if dir, ok := t.unixDir(); ok {
		return vsock.NewUnixTransport(dir, uint32(t.CID))
	}
	return vsock.AFVSockTransport{}
}

// EmulationNote says what is emulated, for machine.emulated; "" for real
// AF_VSOCK.
func (t TransportOptions) EmulationNote() string {
	if _, ok := t.unixDir(); ok {
		return vsock.EmulationNote(t.Transport())
	}
	return ""
}
