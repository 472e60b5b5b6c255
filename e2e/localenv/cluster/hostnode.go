package cluster

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// upHostNode brings up the one node of a one-node cluster on this host:
// CNI, containerd, the images, the kubelet and kube-proxy.
func (u *upper) upHostNode(ctx context.Context) error {
	o, l := u.o, u.l
	bin := func(name string) string { return filepath.Join(o.BinDir, name) }
	if o.KubeVirt {
		if err := u.step("kubelet root "+KubeVirtKubeletRoot+" and "+KubeVirtRunDir+" as shared mounts (KubeVirt)", u.kubevirtMounts); err != nil {
			return err
		}
	}
	if err := u.step("CNI: bridge+host-local (MTU 1500) under Multus thin, in "+filepath.Dir(l.cniConf), func() error {
		if err := o.writeFiles(""); err != nil {
			return err
		}
		return o.installCNIBinaries("")
	}); err != nil {
		return err
	}
	if err := u.step("containerd (own root, state and socket; cgroupfs, overlayfs)", func() error {
		env := []string{"FASTPATH_NODE_CONFIG=" + NodeConfigPath(o.Dir)}
		if err := u.start("containerd", []string{"/usr/bin/containerd", "--config", l.containerdConfig}, env); err != nil {
			return err
		}
		return u.waitFor(ctx, "containerd's CRI", time.Minute, func(ctx context.Context) (bool, error) {
			if _, err := os.Stat(l.containerdSock); err != nil {
				return false, err
			}
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := o.crictl(ctx, "info")
			return err == nil, err
		})
	}); err != nil {
		return err
	}
	if err := u.step("images from "+o.ImagesDir+" into containerd", func() error {
		return o.importImages(ctx)
	}); err != nil {
		return err
	}
	if err := u.step("kubelet (cgroupfs under "+CgroupRoot+", node "+o.NodeName+" Ready)", func() error {
		sys, err := readSysctls()
		if err != nil {
			return err
		}
		u.state.Sysctls = sys
		if u.state.NFTables, err = nftTables(); err != nil {
			return err
		}
		u.state.IPAMBefore = ipamDirs()
		for d := DevicePluginDir; d != "/var/lib"; d = filepath.Dir(d) {
			if _, err := os.Stat(d); err == nil {
				break
			}
			u.state.DevicePluginDirs = append(u.state.DevicePluginDirs, d)
		}
		if err := runstate.Save(l.state, u.state); err != nil {
			return err
		}
		if err := createCgroupRoot(CgroupRoot); err != nil {
			return err
		}
		if err := u.start("kubelet", kubeletArgs(bin("kubelet"), l, o.NodeName, o.NodeIP), nil); err != nil {
			return err
		}
		return u.waitFor(ctx, "node "+o.NodeName+" Ready", 3*time.Minute, nodeReady(u.c, o.NodeName))
	}); err != nil {
		return err
	}
	if err := u.step("kube-proxy (nftables)", func() error {
		if err := u.start("kube-proxy", []string{bin("kube-proxy"),
			"--kubeconfig=" + l.kubeconfig("kube-proxy"), "--proxy-mode=nftables",
			"--hostname-override=" + o.NodeName, "--cluster-cidr=" + o.PodCIDR.Masked().String(),
			fmt.Sprintf("--healthz-bind-address=127.0.0.1:%d", ProxyHealthzPort),
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ProxyMetricsPort),
			// 0: leave the host's conntrack settings as they are.
			"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
			"--v=1",
		}, nil); err != nil {
			return err
		}
		return u.waitFor(ctx, "kube-proxy /healthz", time.Minute, httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", ProxyHealthzPort)))
	}); err != nil {
		return err
	}
	return nil
}

// installCNIBinaries copies the reference plugins the pod network and the
// fastpath NADs use (bridge, host-local, loopback for the runtime) from
// Debian's containernetworking-plugins and Multus's thin plugin into the
// cluster's CNI bin directory, under root ("" or a node's root).
func (o Options) installCNIBinaries(root string) error {
	l := o.layout()
	srcs := map[string]string{"multus": filepath.Join(o.BinDir, "multus")}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		srcs[p] = filepath.Join(DebianCNIDir, p)
	}
	for name, src := range srcs {
		if err := copyFile(src, root+filepath.Join(l.cniBin, name), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// createCgroupRoot makes CgroupRoot in every cgroup v1 hierarchy (the
// kubelet wants it to exist), with cpuset's CPUs and memory nodes copied from
// the root (a new v1 cpuset cgroup starts with none).
func createCgroupRoot(root string) error {
	ents, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return fmt.Errorf("failed to list the cgroup hierarchies: %w", err)
	}
	for _, e := range ents {
		h := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil || e.Name() == "unified" {
			continue // not a v1 hierarchy
		}
		// Each level from the hierarchy's root down: a new v1 cpuset cgroup
		// starts with no CPUs and memory nodes, and takes its parent's.
		parent := h
		for _, part := range strings.Split(strings.Trim(root, "/"), "/") {
			p := filepath.Join(parent, part)
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("failed to create cgroup %s: %w", p, err)
			}
			if e.Name() == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					b, err := os.ReadFile(filepath.Join(parent, f))
					if err != nil {
						return fmt.Errorf("failed to read %s: %w", filepath.Join(parent, f), err)
					}
					if err := os.WriteFile(filepath.Join(p, f), b, 0o644); err != nil {
						return fmt.Errorf("failed to write %s: %w", filepath.Join(p, f), err)
					}
				}
			}
			parent = p
		}
	}
	return nil
}

// DebianCNIDir is where Debian's containernetworking-plugins installs the
// reference plugins.
const DebianCNIDir = "/usr/lib/cni"

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", src, err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", tmp, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("failed to copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("failed to write %s: %w", tmp, err)
	}
	return os.Rename(tmp, dst)
}

// kubeletArgs is the command line of the kubelet binary at kubelet for node
// name at ip with the files of layout l (its configuration, kubeconfig, root
// and certificates), for the one-node cluster and for each node of a
// multi-node one.
func kubeletArgs(kubelet string, l layout, name string, ip netip.Addr) []string {
	return []string{kubelet,
		"--config=" + l.kubeletConfig, "--kubeconfig=" + l.kubeconfig("kubelet"),
		"--root-dir=" + l.kubeletRoot, "--cert-dir=" + filepath.Join(l.kubeletRoot, "pki"),
		"--hostname-override=" + name, "--node-ip=" + ip.String(), "--v=1",
	}
}
