package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// cluster is an embedded control plane (kube-apiserver and etcd from
// $KUBEBUILDER_ASSETS, else <repository>/bin) with Fastpath's, KubeVirt's
// and Multus' CRDs, whose kube-apiserver can be restarted with the same
// address and certificates (package testenv's cannot: envtest makes new
// certificates for a restart unless the certificate directory is fixed).
type cluster struct {
	env        *envtest.Environment
	certDir    string
	c          client.Client
	kubeconfig string // an admin kubeconfig file for the processes under test
}

// quietEnvtest silences controller-runtime's own log (envtest's), once.
var quietEnvtest sync.Once

// startCluster starts the control plane with its certificates under workDir.
func startCluster(workDir string) (*cluster, error) {
	quietEnvtest.Do(func() { crlog.SetLogger(logr.Discard()) })
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			return nil, err
		}
		assets = filepath.Join(root, "bin")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("failed to find kube-apiserver in %s (run `make setup` as root): %w", assets, err)
	}
	crds, err := testenv.CRDs()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(workDir, "apiserver-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	s := fpscheme.New()
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDInstallOptions:        envtest.CRDInstallOptions{CRDs: crds, ErrorIfPathMissing: true, Scheme: s},
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certDir}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("failed to start the embedded control plane (kube-apiserver and etcd from %s): %w", assets, err)
	}
	cl := &cluster{env: env, certDir: certDir}
	cfg.QPS, cfg.Burst = 500, 1000
	if cl.c, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "fastpath-soak-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("failed to add the admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("failed to render kubeconfig: %w", err)
	}
	cl.kubeconfig = filepath.Join(workDir, "kubeconfig")
	if err := os.WriteFile(cl.kubeconfig, data, 0o600); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("failed to write kubeconfig: %w", err)
	}
	return cl, nil
}

func (cl *cluster) stop() error { return cl.env.Stop() }

// restartAPIServer SIGKILLs kube-apiserver (a crash: its graceful
// shutdown under the operator's watches outlasts envtest's minute), waits
// down, starts it again on the same address with the same certificates
// (etcd keeps running) and waits until it answers.
func (cl *cluster) restartAPIServer(ctx context.Context, down time.Duration) error {
	pid, err := cl.apiserverPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("failed to kill kube-apiserver (pid %d): %w", pid, err)
	}
	// envtest reaps it; then its Stop has nothing left to do. Its Stop can
	// still find the process running between the reaping and envtest
	// marking it exited, and then fails to signal it with
	// os.ErrProcessDone: the process is gone all the same.
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if err := cl.env.ControlPlane.APIServer.Stop(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("failed to stop kube-apiserver: %w", err)
	}
	time.Sleep(down)
	if err := cl.env.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("failed to start kube-apiserver again: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := cl.c.List(ctx, &corev1.NamespaceList{}, client.Limit(1))
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver does not answer a minute after its restart: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiserverPID finds this cluster's kube-apiserver: the process whose
// command line has its --cert-dir.
func (cl *cluster) apiserverPID() (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := "--cert-dir=" + cl.certDir
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("failed to find the kube-apiserver process with %s", want)
}

// newNamespace creates a namespace named prefix-<random>.
func (cl *cluster) newNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := cl.c.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("failed to create namespace %s-*: %w", prefix, err)
	}
	return ns.Name, nil
}
