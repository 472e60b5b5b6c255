package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// ipamExec runs delegated (IPAM) plugins other than host-local (which runs
// in this process, see ipamAdd) like invoke.RawExec, except that
// the child inherits the invocation's lock files (state.Lock.File). When
// the plugin is killed (a runtime's timeout, a SIGKILL) while its IPAM
// plugin runs, the IPAM plugin is not killed half-way (host-local killed
// between creating an allocation file and writing its owner leaves an
// allocation no DEL can release), and it keeps the attachment's lock until
// it exits: the runtime's DEL or retried ADD of the attachment waits for it,
// so an allocation it finishes cannot slip in after the DEL released. The
// in-process host-local needs neither: it dies with the plugin, and writes
// an allocation whole or not at all (package hostlocal).
type ipamExec struct {
	invoke.RawExec
	version.PluginDecoder
	locks []*os.File
}

// newIPAMExec returns the invoke.Exec for IPAM calls made under locks.
func newIPAMExec(locks ...*state.Lock) *ipamExec {
	e := &ipamExec{}
	for _, l := range locks {
		e.locks = append(e.locks, l.File())
	}
	return e
}

// ExecPlugin runs pluginPath with stdinData and environ and returns its
// stdout; a failure is a *types.Error with the plugin's own error when it
// printed one.
func (e *ipamExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, pluginPath)
	c.Env = environ
	c.Stdin = bytes.NewReader(stdinData)
	c.Stdout, c.Stderr = &stdout, &stderr
	c.ExtraFiles = e.locks
	if err := c.Run(); err != nil {
		emsg := &types.Error{}
		switch {
		case stdout.Len() > 0 && json.Unmarshal(stdout.Bytes(), emsg) == nil && emsg.Msg != "":
		case stderr.Len() > 0:
			emsg = &types.Error{Code: types.ErrInternal, Msg: fmt.Sprintf("netplugin failed: %q: %v", stderr.String(), err)}
		default:
			emsg = &types.Error{Code: types.ErrInternal, Msg: fmt.Sprintf("netplugin failed with no error message: %v", err)}
		}
		return nil, emsg
	}
	return stdout.Bytes(), nil
}
