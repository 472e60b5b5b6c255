package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// Leftovers lists what of the cluster in opts.Dir is still on this host
// after Down, one line per item (empty: nothing): processes Down stopped or
// any shim of its containerd, mounts under Dir, the pods' network
// namespaces, cgroups under CgroupRoot, the bridges Down removed, kube-proxy's
// nftables tables, shim sockets, /var/log/containers links into the pod logs,
// kernel settings not restored, and files in Dir other than logs/. It reads
// <Dir>/logs/teardown.json, which Down writes.
func Leftovers(opts Options) ([]string, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := o.layout()
	var td teardown
	b, err := os.ReadFile(filepath.Join(l.logs, "teardown.json"))
	if err != nil {
		return nil, fmt.Errorf("failed to read Down's record: %w", err)
	}
	if err := json.Unmarshal(b, &td); err != nil {
		return nil, fmt.Errorf("failed to parse Down's record: %w", err)
	}
	var left []string
	for _, p := range td.Processes {
		if p.Alive() {
			left = append(left, fmt.Sprintf("process %s (pid %d)", p.Name, p.PID))
		}
	}
	for _, pid := range runstate.WithArg("containerd-shim-runc-v2", l.containerdSock) {
		left = append(left, fmt.Sprintf("process containerd-shim-runc-v2 (pid %d)", pid))
	}
	for _, m := range mountsUnder(l.dir) {
		left = append(left, "mount "+m)
	}
	for _, ns := range td.NetNS {
		if _, err := os.Lstat(ns); err == nil {
			left = append(left, "network namespace "+ns)
		}
	}
	for _, c := range cgroupDirs() {
		left = append(left, "cgroup "+c)
	}
	for _, br := range td.Bridges {
		if _, err := netlink.LinkByName(br); err == nil {
			left = append(left, "link "+br)
		}
	}
	for _, t := range kubeProxyTables {
		if exec.Command("nft", "list", "table", t[0], t[1]).Run() == nil {
			left = append(left, "nftables table "+t[0]+" "+t[1])
		}
	}
	if td.NFTables != nil {
		left = append(left, kubeletIPTablesLeft(td.NFTables)...)
	}
	for _, s := range td.ShimSockets {
		if _, err := os.Lstat(s); err == nil {
			left = append(left, "shim socket "+s)
		}
	}
	for _, f := range logLinks(l.podLogs) {
		left = append(left, "log link "+f)
	}
	for _, m := range mountsUnder(td.SharedMounts...) {
		left = append(left, "mount "+m)
	}
	if td.RootMadeShared {
		if shared, err := rootShared(); err == nil && shared {
			left = append(left, "shared propagation of / (private before Up)")
		}
	}
	for _, dir := range td.KubeVirtDirs {
		if _, err := os.Lstat(dir); err == nil {
			left = append(left, "directory "+dir)
		}
	}
	for _, dir := range td.DevicePluginDirs {
		if _, err := os.Lstat(dir); err == nil {
			left = append(left, "directory "+dir)
		}
	}
	for _, dir := range td.IPAMDirs {
		if _, err := os.Stat(dir); err == nil {
			left = append(left, "host-local directory "+dir)
		}
	}
	for _, f := range cniResults(td.Sandboxes) {
		left = append(left, "CNI cache "+f)
	}
	now, err := readSysctls()
	if err != nil {
		return nil, err
	}
	for k, v := range td.Sysctls {
		if now[k] != v {
			left = append(left, fmt.Sprintf("kernel setting /proc/sys/%s is %s, was %s", k, now[k], v))
		}
	}
	ents, err := os.ReadDir(l.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		if e.Name() != "logs" {
			left = append(left, "file "+filepath.Join(l.dir, e.Name()))
		}
	}
	return left, nil
}
