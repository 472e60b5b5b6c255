package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// runState is what Up records for Down (and for a later Up to refuse or
// report a running cluster): the daemons it started and the kernel settings
// it found before the kubelet changed them.
type runState struct {
	// Processes in start order; Down stops them in reverse.
	Processes []runstate.Process `json:"processes"`
	// Sysctls are the values of the kernel settings (path under /proc/sys)
	// before the kubelet set its own; Down restores them.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// NodeName is the node's name (Down reads its FastPathNode).
	NodeName string `json:"nodeName"`
	// NFTables are the nftables tables ("family name") that existed before
	// the kubelet started: Down deletes only the iptables tables it made.
	NFTables []string `json:"nftTables"`
	// IPAMBefore are the host-local directories (/var/lib/cni/networks/*)
	// that existed before the cluster: Down may remove the idle ones made
	// since for fastpath networks (fp-*), whose NADs may be gone by then.
	IPAMBefore []string `json:"ipamBefore"`
	// DevicePluginDirs are the directories of DevicePluginDir (itself and
	// its parents up to /var/lib) that did not exist before the kubelet
	// started, deepest first: Down removes them.
	DevicePluginDirs []string `json:"devicePluginDirs,omitempty"`
	// Registry is host:port of the cluster's OCI registry (RegistryHost),
	// where Install pushes Fastpath's images and chart.
	Registry string `json:"registry,omitempty"`
	// KubeVirt: Up laid the node out for KubeVirt (Options.KubeVirt).
	KubeVirt bool `json:"kubevirt,omitempty"`
	// KubeVirtDirs are the directories Up made for KubeVirt (resolved
	// paths, each with the parents it made, deepest last); SharedMounts the
	// shared bind mounts it made on them. Down undoes both.
	KubeVirtDirs []string `json:"kubevirtDirs,omitempty"`
	SharedMounts []string `json:"sharedMounts,omitempty"`
	// RootMadeShared: Up made the root mount shared (it was private), and
	// Down makes it private again.
	RootMadeShared bool `json:"rootMadeShared,omitempty"`
	// Nodes are the nodes of a multi-node cluster (Options.Nodes > 1), each
	// recorded once its init runs; NodesBridge is set once Up is about to
	// make it.
	Nodes       []nodeState `json:"nodes,omitempty"`
	NodesBridge string      `json:"nodesBridge,omitempty"`
	// MarkedBefore are the links and OVS bridges carrying the agent's marks
	// on the host before Up (markedOnHost): Down names the others left
	// (nil in a run state from before Up recorded it: then it names all).
	MarkedBefore []string `json:"markedBefore"`
}

// daemon is a process started by Up that outlives it.
type daemon struct {
	rec  runstate.Process
	done chan struct{}
	err  error
	log  string
}

// startDaemon starts argv in a session of its own (it outlives `make
// cluster` and no terminal signal reaches it) with stdout and stderr in
// <logs>/<name>.log (truncated) and env added to ours.
func startDaemon(name string, argv, env []string, logs string) (*daemon, error) {
	logPath := filepath.Join(logs, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open the log %s: %w", logPath, err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s (%s): %w", name, strings.Join(argv, " "), err)
	}
	d := &daemon{done: make(chan struct{}), log: logPath}
	d.rec = runstate.Process{Name: name, PID: cmd.Process.Pid, Exe: argv[0]}
	if rec, ok := runstate.Record(name, cmd.Process.Pid); ok {
		d.rec = rec
	}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

// exited returns a non-nil error naming the log when the daemon has ended.
func (d *daemon) exited() error {
	select {
	case <-d.done:
		return fmt.Errorf("%s exited (%v): see %s", d.rec.Name, d.err, d.log)
	default:
		return nil
	}
}
