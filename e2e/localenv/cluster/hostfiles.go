package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// CNICacheDir is libcni's cache directory, which containerd 1.6's CRI uses
// (not configurable there).
const CNICacheDir = "/var/lib/cni"

// removeHostFiles removes host-local's directories of the cluster's NADs
// when they hold no address, the kubelet's device plugin directory when Up
// saw the kubelet make it, the shims' sockets (and /run/containerd/s and
// /run/containerd when that leaves them empty), the kubelet's links in
// /var/log/containers that point into the cluster's pod logs, and
// containerd's CNI cache of the sandboxes whose CNI DEL failed.
func (d *downer) removeHostFiles() error {
	var errs []error
	for _, s := range d.td.ShimSockets {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, dir := range []string{"/run/containerd/s", "/run/containerd"} {
		_ = syscall.Rmdir(dir) // only when empty: the system's containerd may use it
	}
	for _, dir := range d.td.IPAMDirs {
		if err := removeIdleIPAMDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	// The kubelet's registration socket and checkpoint, and the device
	// plugins' sockets, in the device plugin directory it made.
	for i, dir := range d.td.DevicePluginDirs {
		var err error
		if i == 0 {
			err = os.RemoveAll(dir)
		} else {
			err = syscall.Rmdir(dir)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", dir, err))
		}
	}
	for _, f := range append(logLinks(d.l.podLogs), cniResults(d.td.Sandboxes)...) {
		if err := os.Remove(f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// logLinks returns the kubelet's links in /var/log/containers into podLogs.
func logLinks(podLogs string) []string {
	var out []string
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, f := range links {
		if t, err := os.Readlink(f); err == nil && strings.HasPrefix(t, podLogs+"/") {
			out = append(out, f)
		}
	}
	return out
}

// cniResults returns containerd's CNI result cache files of the sandboxes.
func cniResults(sandboxes []string) []string {
	var out []string
	for _, id := range sandboxes {
		if len(id) < 12 || strings.ContainsAny(id, "/*?[") {
			continue
		}
		m, _ := filepath.Glob(filepath.Join(CNICacheDir, "results", "*-"+id+"-*"))
		out = append(out, m...)
	}
	return out
}

// nadIPAMDirs returns host-local's default directories of the networks of
// every NetworkAttachmentDefinition whose IPAM is host-local without its own
// dataDir. Not the fastpath NADs': the plugin keeps their addresses under
// its state directory (netconf.IPAMDataDir), inside the cluster directory.
func nadIPAMDirs(ctx context.Context, kubeconfig string) ([]string, error) {
	c, err := adminClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nads := &nadv1.NetworkAttachmentDefinitionList{}
	if err := c.List(ctx, nads); err != nil {
		return nil, fmt.Errorf("failed to list NetworkAttachmentDefinitions: %w", err)
	}
	var out []string
	for _, n := range nads.Items {
		var conf struct {
			Name string `json:"name"`
			Type string `json:"type"`
			IPAM struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		}
		if json.Unmarshal([]byte(n.Spec.Config), &conf) != nil || conf.IPAM.Type != "host-local" || conf.IPAM.DataDir != "" || conf.Type == wellknown.PluginType ||
			conf.Name == "" || strings.ContainsAny(conf.Name, "/\x00") || conf.Name == "." || conf.Name == ".." {
			continue
		}
		if dir := filepath.Join(CNICacheDir, "networks", conf.Name); !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}
	return out, nil
}

// ipamDirIdle reports whether a host-local directory holds no address (only
// its lock and last_reserved_ip.* files).
func ipamDirIdle(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if e.Name() != "lock" && !strings.HasPrefix(e.Name(), "last_reserved_ip.") {
			return false, nil
		}
	}
	return true, nil
}

// removeIdleIPAMDir removes dir when it holds no address; a directory with
// addresses is left for a later CNI DEL and reported.
func removeIdleIPAMDir(dir string) error {
	idle, err := ipamDirIdle(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !idle {
		return fmt.Errorf("%s still holds addresses: not removed", dir)
	}
	return os.RemoveAll(dir)
}

// ipamDirs lists host-local's directories in CNICacheDir/networks (an empty,
// non-nil list when there are none).
func ipamDirs() []string {
	out := []string{}
	ents, _ := os.ReadDir(filepath.Join(CNICacheDir, "networks"))
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(CNICacheDir, "networks", e.Name()))
		}
	}
	return out
}
