package soak

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsrun"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// cniTimeout bounds one plugin invocation, as a runtime's timeout would.
const cniTimeout = 2 * time.Minute

// request is one CNI invocation of the plugin binary.
type request struct {
	command, containerID, netns, ifName string
	conf                                []byte
}

// node is where the plugin part runs: the plugin binary, a bridge, the
// plugin's state directory and host-local's data directory.
type node struct {
	plugin, cniPath     string
	datapath, bridge    string
	network             string
	stateDir, ipamDir   string
	nodeConfig          string // the node configuration file (netconf.NodeConfigEnv)
	conf                []byte // ADD/CHECK/DEL netconf, CNI 1.0.0
	seq                 atomic.Int64
	removeBridgeAtClose func() error
}

// soakNamespace is the Kubernetes namespace the soak's netconf belongs to
// and its pods claim.
const soakNamespace = "fastpath-soak"

func (n *node) env(r request) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"CNI_COMMAND=" + r.command,
		"CNI_CONTAINERID=" + r.containerID,
		"CNI_NETNS=" + r.netns,
		"CNI_IFNAME=" + r.ifName,
		"CNI_PATH=" + n.cniPath,
		// The pod's namespace, as Multus passes it: the plugin refuses one
		// other than the netconf's.
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=" + soakNamespace,
		// Host paths and addresses come from the node configuration, as the
		// node agent writes it, never from the netconf.
		netconf.NodeConfigEnv + "=" + n.nodeConfig,
	}
}

// exec runs the plugin for r and returns its stdout; a failure is the CNI
// error it printed, or the exit error with its output.
func (n *node) exec(ctx context.Context, r request) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.plugin)
	cmd.Env = n.env(r)
	cmd.Stdin = bytes.NewReader(r.conf)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		cniErr := &types.Error{}
		if json.Unmarshal(stdout.Bytes(), cniErr) == nil && cniErr.Msg != "" {
			return nil, fmt.Errorf("%s %s: %w", r.command, r.containerID, cniErr)
		}
		return nil, fmt.Errorf("%s %s: %w (stderr %q)", r.command, r.containerID, err, lastLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// killed starts the plugin for r and sends it SIGKILL after delay. It
// reports whether the kill landed, i.e. the process was still running.
func (n *node) killed(r request, delay time.Duration) (bool, error) {
	cmd := exec.Command(n.plugin)
	cmd.Env = n.env(r)
	cmd.Stdin = bytes.NewReader(r.conf)
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("failed to start %s: %w", r.command, err)
	}
	time.Sleep(delay)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, nil
		}
	}
	return false, nil
}

// checkConf returns the CHECK netconf for the ADD result out.
func (n *node) checkConf(out []byte) ([]byte, error) {
	var m, prev map[string]any
	if err := json.Unmarshal(n.conf, &m); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(out, &prev); err != nil {
		return nil, fmt.Errorf("failed to decode ADD result %q: %w", out, err)
	}
	m["prevResult"] = prev
	return json.Marshal(m)
}

// gcConf returns a CNI 1.1 GC netconf that keeps no attachment.
func (n *node) gcConf() []byte {
	var m map[string]any
	_ = json.Unmarshal(n.conf, &m)
	m["cniVersion"] = "1.1.0"
	m["cni.dev/valid-attachments"] = []types.GCAttachment{}
	out, _ := json.Marshal(m)
	return out
}

// containerID returns a 64-hex-digit ID like containerd's sandbox IDs.
func (n *node) containerID() string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("soak-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), n.seq.Add(1))))
	return hex.EncodeToString(sum[:])
}

// newNode makes the bridge (a Linux bridge, or an OVS bridge with the
// userspace datapath; OVS must run) and the directories under workDir.
func newNode(plugin, cniPath, datapath, workDir string) (*node, error) {
	suffix := strconv.Itoa(os.Getpid() % 100000)
	n := &node{plugin: plugin, cniPath: cniPath, datapath: datapath, network: "fp-soak",
		stateDir: filepath.Join(workDir, "state-"+datapath), ipamDir: netconf.IPAMDataDir(filepath.Join(workDir, "state-"+datapath))}
	m := map[string]any{"cniVersion": "1.0.0", "name": n.network, "namespace": soakNamespace, "type": wellknown.PluginType, "datapath": datapath,
		"mtu":  9000,
		"ipam": map[string]any{"type": "host-local", "subnet": "10.251.0.0/16"}}
	nc := netconf.NodeConfig{StateDir: n.stateDir}
	switch datapath {
	case netconf.DatapathLinuxBridge:
		n.bridge = "fpsoakb" + suffix
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: n.bridge}}
		if err := netlink.LinkAdd(br); err != nil {
			return nil, fmt.Errorf("failed to add bridge %s: %w", n.bridge, err)
		}
		n.removeBridgeAtClose = func() error { return netlink.LinkDel(br) }
		if err := netlink.LinkSetMTU(br, 9000); err != nil {
			n.close()
			return nil, fmt.Errorf("failed to set MTU of bridge %s: %w", n.bridge, err)
		}
		if err := netlink.LinkSetUp(br); err != nil {
			n.close()
			return nil, fmt.Errorf("failed to set bridge %s up: %w", n.bridge, err)
		}
		// Marked as the node agent marks its bridges: the plugin attaches
		// only to those.
		if err := netlink.LinkSetAlias(br, bridgeMarker); err != nil {
			n.close()
			return nil, fmt.Errorf("failed to mark bridge %s: %w", n.bridge, err)
		}
	case netconf.DatapathOVS:
		n.bridge = "fpsoako" + suffix
		if out, err := ovsrun.Vsctl("add-br", n.bridge, "--", "set", "Bridge", n.bridge, "datapath_type=netdev",
			`external_ids:"`+wellknown.MarkerKey+`"=soak`,
			"--", "set", "Interface", n.bridge, "mtu_request=9000"); err != nil {
			return nil, fmt.Errorf("failed to add OVS bridge %s: %w: %s", n.bridge, err, out)
		}
		n.removeBridgeAtClose = func() error {
			if out, err := ovsrun.Vsctl("--if-exists", "del-br", n.bridge); err != nil {
				return fmt.Errorf("failed to delete OVS bridge %s: %w: %s", n.bridge, err, out)
			}
			return nil
		}
		nc.OVS.Socket = ovsrun.Socket
		// The userspace datapath forwards veth traffic with offloads off
		// unless userspace TSO is on (the plugin's preflight says so).
		if out, _ := ovsrun.Vsctl("get", "Open_vSwitch", ".", "other_config:userspace-tso-enable"); strings.Trim(out, "\"\n") != "true" {
			off := map[string]bool{}
			for _, row := range wellknown.Offloads {
				off[row.Name] = false
			}
			m["offloads"] = off
		}
	default:
		return nil, fmt.Errorf("unknown datapath %q", datapath)
	}
	n.nodeConfig = filepath.Join(workDir, "node-"+datapath+".json")
	if err := netconf.WriteNodeConfig(n.nodeConfig, nc); err != nil {
		n.close()
		return nil, err
	}
	m["bridge"] = n.bridge
	n.conf, _ = json.Marshal(m)
	return n, nil
}

// bridgeMarker is the alias the soak gives its Linux bridges: the node
// agent's marker key (internal/datapath/wellknown.MarkerKey) with the soak's value.
const bridgeMarker = wellknown.MarkerKey + "=soak"

func (n *node) close() error {
	if n.removeBridgeAtClose == nil {
		return nil
	}
	return n.removeBridgeAtClose()
}

// leaks lists what is left on the node of the plugin's attachments: host
// veths named by the plugin for the given container IDs, bridge ports,
// host-local allocations, and files in the state directory other than the
// lock.
func (n *node) leaks(hostIfs []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, name := range hostIfs {
		if _, err := netlink.LinkByName(name); err == nil {
			out["host veths"] = append(out["host veths"], name)
		}
	}
	ports, err := n.ports()
	if err != nil {
		return nil, err
	}
	if len(ports) > 0 {
		out["bridge ports"] = ports
	}
	entries, err := os.ReadDir(filepath.Join(n.ipamDir, netconf.IPAMNetworkName(n.bridge)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		if net.ParseIP(e.Name()) != nil {
			out["IP allocations"] = append(out["IP allocations"], e.Name())
		}
	}
	entries, err = os.ReadDir(n.stateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		switch e.Name() {
		case "lock", netconf.IPAMDataDirName: // IPAM's data is checked above, address by address
		case leases.Dir: // the DHCP leases directory stays; its files must not
			left, err := os.ReadDir(filepath.Join(n.stateDir, leases.Dir))
			if err != nil {
				return nil, err
			}
			for _, l := range left {
				out["DHCP leases"] = append(out["DHCP leases"], l.Name())
			}
		default:
			out["state files"] = append(out["state files"], e.Name())
		}
	}
	return out, nil
}

// ports lists the bridge's ports (not an OVS bridge's internal port).
func (n *node) ports() ([]string, error) {
	if n.datapath == netconf.DatapathOVS {
		out, err := ovsrun.Vsctl("list-ports", n.bridge)
		if err != nil {
			return nil, fmt.Errorf("failed to list ports of %s: %w: %s", n.bridge, err, out)
		}
		return strings.Fields(out), nil
	}
	br, err := netlink.LinkByName(n.bridge)
	if err != nil {
		return nil, fmt.Errorf("failed to look up bridge %s: %w", n.bridge, err)
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("failed to list links: %w", err)
	}
	var names []string
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			names = append(names, l.Attrs().Name)
		}
	}
	return names, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
