package plugin

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/portsec"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// VersionInfo lists the CNI specification versions the plugin supports.
var VersionInfo = version.PluginSupports(netconf.SupportedVersions...)

// About is printed on stderr when the binary runs without CNI_COMMAND.
const About = "CNI plugin fastpath: node-local jumbo-frame network on a Linux bridge or Open vSwitch"

// Options say which datapaths a plugin binary carries.
type Options struct {
	// OVS opens the Open vSwitch datapath (ovs.Open). bin/fastpath is built
	// without it (package datapath says why) and leaves it nil.
	OVS datapath.Opener
	// OVSPlugin, used when OVS is nil, is the binary that serves the
	// invocations that need OVSDB: bin/fastpath hands them over to it
	// (execve: same process, environment and stdin; see handOver). Empty:
	// they fail with an error naming the missing datapath.
	OVSPlugin string
}

// Plugin is the fastpath CNI plugin with the datapaths of its Options.
type Plugin struct {
	ovs       datapath.Opener
	ovsPlugin string
}

// New returns the plugin with opts.
func New(opts Options) *Plugin { return &Plugin{ovs: opts.OVS, ovsPlugin: opts.OVSPlugin} }

// Funcs returns the skel callbacks of the plugin with opts, for
// skel.PluginMainFuncs.
func Funcs(opts Options) skel.CNIFuncs { return New(opts).Funcs() }

// Funcs returns the skel callbacks of p, for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{
		Add: keepContext(p.CmdAdd), Check: keepContext(p.CmdCheck), Del: keepContext(p.CmdDel),
		Status: keepContext(p.CmdStatus), GC: keepContext(p.CmdGC),
	}
}

// keepContext makes the CNI error that skel prints carry the whole message of
// an error that wraps a *types.Error (e.g. "failed to allocate addresses with
// IPAM plugin host-local: <its message>"): skel would print only the wrapped
// one. The code and details stay those of the wrapped error.
func keepContext(f func(*skel.CmdArgs) error) func(*skel.CmdArgs) error {
	return func(args *skel.CmdArgs) error {
		err := f(args)
		var cniErr *types.Error
		if err != nil && errors.As(err, &cniErr) && error(cniErr) != err {
			return types.NewError(cniErr.Code, err.Error(), cniErr.Details)
		}
		return err
	}
}

// opTimeout bounds the OVSDB and netlink work of one invocation; the OVS
// attach wait (internal/datapath/ovsdb.AttachTimeout, 30 s) is part of it.
const opTimeout = 60 * time.Second

// logger writes to stderr: stdout carries only the CNI result.
var logger = log.New(os.Stderr, "fastpath: ", log.LstdFlags|log.Lmicroseconds)

// openNetNS opens CNI_NETNS; a bad path is CNI error 8 (ErrInvalidNetNS).
func openNetNS(path string) (ns.NetNS, error) {
	netns, err := ns.GetNS(path)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("failed to open netns %q: %v", path, err), "")
	}
	return netns, nil
}

// CmdStatus (CNI 1.1) reports whether the plugin can serve ADD: the state
// directory is usable, the bridge exists (and, for OVS, OVSDB answers), the
// kernel's nf_tables answers over netlink when the port needs port security
// (portsec.Available), and the IPAM plugin's own STATUS. Errors carry code 50 (ErrPluginNotAvailable)
// or 51 (ErrLimitedConnectivity, e.g. a Linux bridge that is down).
func (p *Plugin) CmdStatus(args *skel.CmdArgs) error {
	conf, _, err := netconf.LoadNetConf(args.StdinData)
	if err != nil {
		return err
	}
	if _, err := state.New(conf.StateDir); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dp, err := p.open(ctx, conf)
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	defer dp.Close()
	if err := dp.Status(ctx); err != nil {
		return err
	}
	if conf.PortSecurityOn() {
		if err := portsec.Available(); err != nil {
			return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
		}
	}
	if err := newIPAMExec().delegate(ctx, "STATUS", conf.IPAM.Type(), conf.IPAMConf); err != nil {
		var cniErr *types.Error
		if errors.As(err, &cniErr) && (cniErr.Code == types.ErrPluginNotAvailable || cniErr.Code == types.ErrLimitedConnectivity) {
			return cniErr
		}
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("IPAM plugin %s is not available: %v", conf.IPAM.Type(), err), "")
	}
	return nil
}
