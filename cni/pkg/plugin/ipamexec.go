package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"syscall"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// ipamExec runs delegated (IPAM) plugins like invoke.RawExec, except that
// the child gets PR_SET_PDEATHSIG=SIGKILL: when the plugin is killed (a
// runtime's timeout, a SIGKILL) its IPAM child dies with it instead of
// finishing an allocation after the runtime's DEL has already released the
// attachment's addresses, which would leak the address. The signal follows
// the thread that started the child; CmdAdd, CmdDel and CmdGC run on the
// main goroutine, which main locks to the main thread for the whole process.
type ipamExec struct {
	invoke.RawExec
	version.PluginDecoder
}

// ipamExecer is the invoke.Exec of every IPAM call of the plugin.
var ipamExecer invoke.Exec = &ipamExec{}

// ExecPlugin runs pluginPath with stdinData and environ and returns its
// stdout; a failure is a *types.Error with the plugin's own error when it
// printed one.
func (e *ipamExec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, pluginPath)
	c.Env = environ
	c.Stdin = bytes.NewReader(stdinData)
	c.Stdout, c.Stderr = &stdout, &stderr
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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

func ipamAdd(ctx context.Context, ipamType string, conf []byte) (types.Result, error) {
	return invoke.DelegateAdd(ctx, ipamType, conf, ipamExecer)
}

func ipamDel(ctx context.Context, ipamType string, conf []byte) error {
	return invoke.DelegateDel(ctx, ipamType, conf, ipamExecer)
}

func ipamCheck(ctx context.Context, ipamType string, conf []byte) error {
	return invoke.DelegateCheck(ctx, ipamType, conf, ipamExecer)
}
