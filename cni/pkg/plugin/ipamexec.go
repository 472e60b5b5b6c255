package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// ipamExec runs delegated (IPAM) plugins other than host-local (which runs
// in this process, see ipamAdd) like containernetworking/cni's
// invoke.RawExec, except that the child inherits the invocation's lock files (state.Lock.File). When
// the plugin is killed (a runtime's timeout, a SIGKILL) while its IPAM
// plugin runs, the IPAM plugin is not killed half-way (host-local killed
// between creating an allocation file and writing its owner leaves an
// allocation no DEL can release), and it keeps the attachment's lock until
// it exits: the runtime's DEL or retried ADD of the attachment waits for it,
// so an allocation it finishes cannot slip in after the DEL released. The
// in-process host-local needs neither: it dies with the plugin, and writes
// an allocation whole or not at all (package hostlocal).
//
// The plugin does not link the invoke package: it brings OpenTelemetry,
// net/http and crypto/tls for trace propagation the plugin never uses, 0.36
// ms of CPU on every start of the plugin (docs/design.md §4.3). The
// functions below do what its Delegate*, FindInPath, GetVersionInfo and
// ExecPluginWithoutResult do (containernetworking/cni v1.3.1) for the calls
// the plugin makes.
type ipamExec struct {
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

// findPlugin returns the path of the plugin name in CNI_PATH: the first
// regular file of that name in its directories, as invoke.FindInPath.
func findPlugin(name string) (string, error) {
	cniPath := os.Getenv("CNI_PATH")
	if strings.ContainsRune(name, os.PathSeparator) {
		return "", fmt.Errorf("invalid plugin name: %s", name)
	}
	paths := filepath.SplitList(cniPath)
	if len(paths) == 0 {
		return "", fmt.Errorf("failed to find plugin %q: CNI_PATH is empty", name)
	}
	for _, dir := range paths {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("failed to find plugin %q in path %s", name, paths)
}

// environ returns this process's environment with the variables of set
// ("NAME=value") replacing any of the same name, as invoke's AsEnv does.
func environ(set ...string) []string {
	out := make([]string, 0, len(os.Environ())+len(set))
	names := map[string]bool{}
	for _, kv := range set {
		names[kv[:strings.IndexByte(kv, '=')+1]] = true
	}
	for _, kv := range os.Environ() {
		if i := strings.IndexByte(kv, '='); i < 0 || !names[kv[:i+1]] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// delegate runs command (CHECK, DEL, GC, STATUS) of the IPAM plugin
// ipamType from CNI_PATH with stdin and this invocation's environment, as
// invoke.Delegate<command> does.
func (e *ipamExec) delegate(ctx context.Context, command, ipamType string, stdin []byte) error {
	path, err := findPlugin(ipamType)
	if err != nil {
		return err
	}
	_, err = e.ExecPlugin(ctx, path, stdin, environ("CNI_COMMAND="+command))
	return err
}

// delegateAdd runs the ADD of the IPAM plugin ipamType as invoke.DelegateAdd
// does: a result without cniVersion is taken to be in the netconf's version.
func (e *ipamExec) delegateAdd(ctx context.Context, ipamType string, stdin []byte) (types.Result, error) {
	path, err := findPlugin(ipamType)
	if err != nil {
		return nil, err
	}
	out, err := e.ExecPlugin(ctx, path, stdin, environ("CNI_COMMAND=ADD"))
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("failed to unmarshal raw result: %w", err)
	}
	if v, ok := raw["cniVersion"].(string); ok && v != "" {
		return create.Create(v, out)
	}
	confVersion, err := (&version.ConfigDecoder{}).Decode(stdin)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		raw = map[string]any{}
	}
	raw["cniVersion"] = confVersion
	if out, err = json.Marshal(raw); err != nil {
		return nil, fmt.Errorf("failed to remarshal fixed result: %w", err)
	}
	return create.Create(confVersion, out)
}

// execDel runs the DEL of the IPAM plugin at path for the attachment
// containerID/ifName in netns, with CNI_ARGS empty, as
// invoke.ExecPluginWithoutResult with invoke.Args does.
func (e *ipamExec) execDel(ctx context.Context, path string, stdin []byte, containerID, netns, ifName string) error {
	_, err := e.ExecPlugin(ctx, path, stdin, environ("CNI_COMMAND=DEL", "CNI_CONTAINERID="+containerID, "CNI_NETNS="+netns,
		"CNI_ARGS=", "CNI_IFNAME="+ifName, "CNI_PATH="+os.Getenv("CNI_PATH")))
	return err
}

// versionInfo asks the plugin at path for the CNI versions it speaks, as
// invoke.GetVersionInfo does (a plugin that does not know VERSION speaks 0.1.0).
func (e *ipamExec) versionInfo(ctx context.Context, path string) (version.PluginInfo, error) {
	stdin := []byte(fmt.Sprintf(`{"cniVersion":%q}`, version.Current()))
	out, err := e.ExecPlugin(ctx, path, stdin, environ("CNI_COMMAND=VERSION", "CNI_CONTAINERID=", "CNI_NETNS=dummy",
		"CNI_ARGS=", "CNI_IFNAME=dummy", "CNI_PATH=dummy"))
	if err != nil {
		if err.Error() == "unknown CNI_COMMAND: VERSION" {
			return version.PluginSupports("0.1.0"), nil
		}
		return nil, err
	}
	return e.Decode(out)
}
