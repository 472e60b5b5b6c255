package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// Cluster is a running cluster, as Up leaves it.
type Cluster struct {
	// Kubeconfig is the admin kubeconfig file.
	Kubeconfig string
	// NodeName and NodeIP are the one node's.
	NodeName string
	NodeIP   string
	// CNIBinDir and CNIConfDir are the cluster's CNI directories (the chart's
	// agent.cniBinDir and agent.cniConfDir).
	CNIBinDir, CNIConfDir string
	// PodCIDR is the pod network (the chart's operator.podNetworkCIDRs).
	PodCIDR string
	// Versions of the parts, for the report.
	Versions map[string]string
	// Nodes are the names of every node (NodeName is the first).
	Nodes []string
}

// nodeNames is "node <name>" or "nodes <a>, <b>".
func (c *Cluster) nodeNames() string {
	if len(c.Nodes) > 1 {
		return "nodes " + strings.Join(c.Nodes, ", ")
	}
	return "node " + c.NodeName
}

// Up starts the cluster and returns when the node is Ready and pods can be
// created (the default ServiceAccount exists). It prints one line per step
// with its duration to opts.Out. On failure it stops and removes what it
// started (Down) and returns the first error, naming the log to read. A
// cluster already running in opts.Dir is an error.
func Up(ctx context.Context, opts Options) (*Cluster, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := o.layout()
	total := time.Now()
	if o.Nodes > 1 {
		fmt.Fprintf(o.Out, "cluster: a REAL Kubernetes cluster of %d nodes (kubelet, containerd, Multus; nothing emulated; each node in its own network, mount, UTS and PID namespaces on this host) in %s\n", o.Nodes, o.Dir)
	} else {
		fmt.Fprintf(o.Out, "cluster: a REAL single-node Kubernetes cluster (kubelet, containerd, Multus; nothing emulated) in %s\n", o.Dir)
	}
	if o.KubeVirtDir != "" {
		fmt.Fprintf(o.Out, "cluster: KubeVirt %s from %s (REAL: virt-operator, virt-api, virt-controller, virt-handler, virt-launcher built from source; the guests' CPU is EMULATED by QEMU TCG where the KVM probe cannot boot a guest)\n", filepath.Base(o.KubeVirtDir), o.KubeVirtDir)
	} else {
		fmt.Fprintf(o.Out, "cluster: KubeVirt is NOT installed: the cluster runs pods, not VMs\n")
	}
	if err := o.preflight(); err != nil {
		return nil, err
	}
	u := &upper{o: o, l: l, state: runState{NodeName: o.NodeName}}
	c, err := u.run(ctx)
	if err != nil {
		fmt.Fprintf(o.Out, "cluster: FAILED: %v\ncluster: removing what was started\n", err)
		if derr := Down(context.WithoutCancel(ctx), opts); derr != nil {
			fmt.Fprintf(o.Out, "cluster: teardown after the failure: %v\n", derr)
		}
		return nil, err
	}
	fmt.Fprintf(o.Out, "cluster: up in %.1fs: %s Ready; export KUBECONFIG=%s\n", time.Since(total).Seconds(), c.nodeNames(), c.Kubeconfig)
	return c, nil
}

// upper runs Up's steps and records what it started.
type upper struct {
	o       Options
	l       layout
	state   runState
	daemons []*daemon
	c       client.Client
}

func (u *upper) step(name string, f func() error) error {
	start := time.Now()
	err := f()
	status := "ok"
	if err != nil {
		status = "FAILED"
	}
	fmt.Fprintf(u.o.Out, "cluster: %-72s %6.1fs %s\n", name, time.Since(start).Seconds(), status)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// start starts a daemon and records it in the state file at once, so a
// failure (or a kill of this process) later leaves Down what to stop.
func (u *upper) start(name string, argv, env []string) error {
	d, err := startDaemon(name, argv, env, u.l.logs)
	if err != nil {
		return err
	}
	u.daemons = append(u.daemons, d)
	u.state.Processes = append(u.state.Processes, d.rec)
	return runstate.Save(u.l.state, u.state)
}

// waitFor polls check every 250 ms until it returns true, a daemon exits,
// or timeout passes; the error says what was awaited.
func (u *upper) waitFor(ctx context.Context, what string, timeout time.Duration, check func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, d := range u.daemons {
			if err := d.exited(); err != nil {
				return false, err
			}
		}
		ok, err := check(ctx)
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		if last != nil && !strings.Contains(err.Error(), "exited") {
			return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, last)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func (u *upper) run(ctx context.Context) (*Cluster, error) {
	o, l := u.o, u.l
	bin := func(name string) string { return filepath.Join(o.BinDir, name) }

	for _, d := range []string{l.dir, l.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("failed to create %s: %w", d, err)
		}
	}
	marked, _, err := markedOnHost(ctx, wellknown.DefaultOVSSocket)
	if err != nil {
		return nil, fmt.Errorf("failed to list the links with the agent's marks before the cluster: %w", err)
	}
	u.state.MarkedBefore = append([]string{}, marked...) // never nil: nil means "not recorded"
	if err := runstate.Save(l.state, u.state); err != nil {
		return nil, err
	}
	if o.Nodes > 1 { // first: the control plane's address is on it
		if err := u.step(fmt.Sprintf("bridge %s %s (the nodes' network; the control plane at %s)", NodesBridge, NodesCIDR, hostAddr()), u.nodesBridge); err != nil {
			return nil, err
		}
	}
	if err := u.step("certificates (one CA) and kubeconfigs", o.writePKI); err != nil {
		return nil, err
	}
	if err := u.step("etcd", func() error {
		if err := u.start("etcd", []string{bin("etcd"),
			"--name=" + o.NodeName, "--data-dir=" + l.etcdData,
			fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", EtcdPort),
			fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", EtcdPort),
			fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", EtcdPeerPort),
			fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", EtcdPeerPort),
			fmt.Sprintf("--initial-cluster=%s=http://127.0.0.1:%d", o.NodeName, EtcdPeerPort),
			"--quota-backend-bytes=2147483648",
		}, nil); err != nil {
			return err
		}
		return u.waitFor(ctx, "etcd /health", time.Minute, httpOK(fmt.Sprintf("http://127.0.0.1:%d/health", EtcdPort)))
	}); err != nil {
		return nil, err
	}
	if err := u.step("kube-apiserver (ServiceAccount and NodeRestriction admission, Node+RBAC)", func() error {
		if err := u.start("kube-apiserver", o.apiserverArgs(bin("kube-apiserver")), nil); err != nil {
			return err
		}
		if err := u.waitFor(ctx, "kube-apiserver /readyz", 2*time.Minute, httpOK(fmt.Sprintf("https://127.0.0.1:%d/readyz", APIServerPort))); err != nil {
			return err
		}
		c, err := adminClient(l.adminKubeconfig)
		u.c = c
		return err
	}); err != nil {
		return nil, err
	}
	if err := u.step("Multus's NetworkAttachmentDefinition CRD and ClusterRole ("+MultusVersion+")", func() error {
		return applyMultusObjects(ctx, u.c)
	}); err != nil {
		return nil, err
	}
	if err := u.step("kube-controller-manager and kube-scheduler", func() error {
		if err := u.start("kube-controller-manager", o.controllerManagerArgs(bin("kube-controller-manager")), nil); err != nil {
			return err
		}
		if err := u.start("kube-scheduler", o.schedulerArgs(bin("kube-scheduler")), nil); err != nil {
			return err
		}
		if err := u.waitFor(ctx, "kube-controller-manager /healthz", time.Minute, httpOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", ControllerManagerPort))); err != nil {
			return err
		}
		return u.waitFor(ctx, "kube-scheduler /healthz", time.Minute, httpOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", SchedulerPort)))
	}); err != nil {
		return nil, err
	}
	if err := u.step(fmt.Sprintf("OCI registry (distribution %s) at %s, the nodes' containerd pulls from it", RegistryVersion, o.RegistryHost()), func() error {
		return u.startRegistry(ctx)
	}); err != nil {
		return nil, err
	}
	if o.Nodes > 1 {
		if err := u.upNodes(ctx); err != nil {
			return nil, err
		}
	} else if err := u.upHostNode(ctx); err != nil {
		return nil, err
	}
	if err := u.step("default ServiceAccount and kube-root-ca.crt (pods can be created)", func() error {
		return u.waitFor(ctx, "the default ServiceAccount", time.Minute, func(ctx context.Context) (bool, error) {
			if err := u.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{}); err != nil {
				return false, err
			}
			err := u.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kube-root-ca.crt"}, &corev1.ConfigMap{})
			return err == nil, err
		})
	}); err != nil {
		return nil, err
	}
	if o.KubeVirtDir != "" {
		if err := u.deployKubeVirt(ctx); err != nil {
			return nil, err
		}
	}
	nodeName, nodeIP, names := o.NodeName, o.NodeIP.String(), []string{o.NodeName}
	if len(u.state.Nodes) > 0 {
		nodeName, nodeIP, names = u.state.Nodes[0].Name, u.state.Nodes[0].IP.String(), nil
		for _, n := range u.state.Nodes {
			names = append(names, n.Name)
		}
	}
	return &Cluster{
		Kubeconfig: l.adminKubeconfig, NodeName: nodeName, NodeIP: nodeIP,
		CNIBinDir: l.cniBin, CNIConfDir: l.cniConf, PodCIDR: o.PodCIDR.Masked().String(),
		Versions: versions(o.BinDir), Nodes: names,
	}, nil
}

// startRegistry starts the cluster's OCI registry (bin/registry, a
// distribution release) on RegistryHost with its storage under the cluster
// directory, writes the hosts.d every node's containerd reads (plain HTTP to
// it), records its address for Install and waits until it serves /v2/.
func (u *upper) startRegistry(ctx context.Context) error {
	l, host := u.l, u.o.RegistryHost()
	// The wait below would take another registry's answer for this one's.
	ln, err := net.Listen("tcp", host)
	if err != nil {
		return fmt.Errorf("the registry's address %s is taken (another cluster's registry? make cluster-down): %w", host, err)
	}
	if err := ln.Close(); err != nil {
		return err
	}
	hosts := filepath.Join(l.registryHosts(), host)
	for _, d := range []string{l.registryData(), hosts} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for file, text := range map[string]string{l.registryConfig(): l.registryConfigFile(host), filepath.Join(hosts, "hosts.toml"): registryHostsFile(host)} {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			return fmt.Errorf("failed to write %s: %w", file, err)
		}
	}
	// OTEL_TRACES_EXPORTER=none: distribution v3 exports traces to a
	// collector on localhost:4318 otherwise, and logs each failure.
	if err := u.start("registry", []string{filepath.Join(u.o.BinDir, "registry"), "serve", l.registryConfig()}, []string{"OTEL_TRACES_EXPORTER=none"}); err != nil {
		return err
	}
	u.state.Registry = host
	if err := runstate.Save(l.state, u.state); err != nil {
		return err
	}
	return u.waitFor(ctx, "the registry's /v2/", time.Minute, httpOK("http://"+host+"/v2/"))
}

func (o Options) apiserverArgs(exe string) []string {
	l := o.layout()
	p := func(f string) string { return filepath.Join(l.pki, f) }
	return []string{exe,
		"--advertise-address=" + o.NodeIP.String(), "--bind-address=0.0.0.0",
		fmt.Sprintf("--secure-port=%d", APIServerPort),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", EtcdPort),
		"--client-ca-file=" + p("ca.crt"),
		"--tls-cert-file=" + p("apiserver.crt"), "--tls-private-key-file=" + p("apiserver.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p("sa.pub"), "--service-account-signing-key-file=" + p("sa.key"),
		"--service-cluster-ip-range=" + o.ServiceCIDR.Masked().String(),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + p("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + p("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + p("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		// The aggregation layer (virt-api refuses to start without the
		// requestheader CA in extension-apiserver-authentication): kubeadm's
		// flags, with routing to the endpoints' pod IPs, since the API
		// server runs on the host without kube-proxy's service routing.
		"--requestheader-client-ca-file=" + p("front-proxy-ca.crt"),
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p("front-proxy-client.crt"),
		"--proxy-client-key-file=" + p("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
		"--cert-dir=" + l.pki, "--profiling=false",
	}
}

func (o Options) controllerManagerArgs(exe string) []string {
	l := o.layout()
	kc := l.kubeconfig("kube-controller-manager")
	return []string{exe,
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ControllerManagerPort),
		"--cert-dir=" + filepath.Join(l.dir, "kube-controller-manager"),
		"--root-ca-file=" + filepath.Join(l.pki, "ca.crt"),
		"--service-account-private-key-file=" + filepath.Join(l.pki, "sa.key"),
		"--cluster-signing-cert-file=" + filepath.Join(l.pki, "ca.crt"),
		"--cluster-signing-key-file=" + filepath.Join(l.pki, "ca.key"),
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=" + o.ServiceCIDR.Masked().String(),
		"--leader-elect=false", "--profiling=false",
	}
}

func (o Options) schedulerArgs(exe string) []string {
	l := o.layout()
	kc := l.kubeconfig("kube-scheduler")
	return []string{exe,
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", SchedulerPort),
		"--cert-dir=" + filepath.Join(l.dir, "kube-scheduler"),
		"--leader-elect=false", "--profiling=false",
	}
}

// httpOK returns a check that GETs url (TLS unverified: the health endpoints
// of our own processes on 127.0.0.1) and wants 200.
func httpOK(url string) func(context.Context) (bool, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // own processes on loopback
	return func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return true, nil
	}
}

func nodeReady(c client.Client, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return true, nil
				}
				return false, fmt.Errorf("node %s is not Ready: %s: %s", name, cond.Reason, cond.Message)
			}
		}
		return false, fmt.Errorf("node %s reports no Ready condition yet", name)
	}
}

// crictl runs bin/crictl with the cluster's crictl.yaml (containerd's
// socket) and returns its standard output; the error carries its standard
// error.
func (o Options) crictl(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	argv := append([]string{"--config", o.layout().crictlConfig}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(o.BinDir, "crictl"), argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("crictl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// preflight checks, before anything starts, that this machine can run the
// cluster, and says what to do otherwise.
func (o Options) preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("make cluster needs root (containerd, the kubelet, cgroups, network namespaces)")
	}
	if o.KubeVirt && o.Nodes == 1 { // before anything starts: a failed Up's Down would touch the other cluster's cgroups
		for _, dir := range []string{KubeVirtKubeletRoot, KubeVirtRunDir} {
			if _, err := os.Lstat(dir); err == nil {
				return fmt.Errorf("%s exists (another kubelet's or KubeVirt's, or a cluster not brought down?): this cluster's KubeVirt needs it as its own; make cluster-down, remove it, or bring the cluster up without KUBEVIRT=1", dir)
			}
		}
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl", "crictl", "multus", "registry"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			missing = append(missing, filepath.Join(o.BinDir, b)+" (make setup)")
		}
	}
	for _, f := range []string{"/usr/bin/containerd", "/usr/bin/containerd-shim-runc-v2", "/usr/bin/ctr", "/usr/sbin/runc", "/usr/sbin/nft",
		filepath.Join(DebianCNIDir, "bridge"), filepath.Join(DebianCNIDir, "host-local"), filepath.Join(DebianCNIDir, "loopback")} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f+" (make setup: apt packages containerd, runc, nftables, containernetworking-plugins)")
		}
	}
	if _, err := os.Stat(filepath.Join(o.ImagesDir, "pause.tar")); err != nil {
		missing = append(missing, filepath.Join(o.ImagesDir, "pause.tar")+" (make images)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing: %s", strings.Join(missing, "; "))
	}
	for _, c := range []string{"memory", "cpu", "cpuacct", "cpuset", "pids"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, "cgroup.procs")); err != nil {
			return fmt.Errorf("the cgroup v1 controller %s is not mounted at /sys/fs/cgroup/%s: this cluster runs the kubelet with cgroupfs on cgroup v1", c, c)
		}
	}
	st, err := runstate.Load[runState](o.layout().state)
	if err != nil {
		return err
	}
	for _, p := range st.Processes {
		if p.Alive() {
			return fmt.Errorf("a cluster is already running in %s (%s, pid %d): run `make cluster-down` first", o.Dir, p.Name, p.PID)
		}
	}
	var busy []string
	for _, p := range []int{EtcdPort, EtcdPeerPort, APIServerPort, KubeletPort, KubeletHealthzPort, ControllerManagerPort, SchedulerPort, ProxyHealthzPort, ProxyMetricsPort} {
		ln, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			busy = append(busy, fmt.Sprint(p))
			continue
		}
		ln.Close()
	}
	if len(busy) > 0 {
		return fmt.Errorf("TCP ports %s are in use: another cluster or Kubernetes component runs here (make cluster-down?)", strings.Join(busy, ", "))
	}
	return nil
}

// versions reports the versions of the parts, for the summary.
func versions(binDir string) map[string]string {
	v := map[string]string{}
	run := func(key string, argv ...string) {
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err == nil {
			v[key] = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
		}
	}
	run("kubelet", filepath.Join(binDir, "kubelet"), "--version")
	run("containerd", "/usr/bin/containerd", "--version")
	run("runc", "/usr/sbin/runc", "--version")
	run("multus", filepath.Join(binDir, "multus"), "-version")
	return v
}
