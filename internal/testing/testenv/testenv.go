package testenv

import (
	"context"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fastpath-io/fastpath/config/crd"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
)

//go:embed crds/*.yaml
var fixtures embed.FS

// Env is a running control plane.
type Env struct {
	// Config reaches the apiserver as an admin.
	Config *rest.Config
	// Client is a direct (uncached) client with the scheme of internal/platform/scheme.
	Client client.Client
	// Scheme is the scheme of Client.
	Scheme *runtime.Scheme

	env *envtest.Environment
}

// Options tune Start. The zero value is fine.
type Options struct {
	// AssetsDir holds kube-apiserver and etcd. Default: $KUBEBUILDER_ASSETS, else
	// <repository root>/bin.
	AssetsDir string
	// NoFastpathCRDs installs only the KubeVirt and Multus fixtures, for
	// tests that install the fastpath.io CRDs themselves (the chart's upgrade test).
	NoFastpathCRDs bool
}

// Start starts etcd and kube-apiserver and installs the CRDs, waiting until they
// are served. It fails with a message that says to run `make setup` when the
// binaries are missing. Call Stop when done (also on failure paths).
func Start(opts Options) (*Env, error) {
	assets := opts.AssetsDir
	if assets == "" {
		assets = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if assets == "" {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		assets = filepath.Join(root, "bin")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("failed to find %s in %s (run `make setup` as root): %w", b, assets, err)
		}
	}

	crds, err := CRDs()
	if err != nil {
		return nil, err
	}
	if opts.NoFastpathCRDs {
		crds, err = crd.Decode(fixtures, "crds")
		if err != nil {
			return nil, err
		}
	}
	s := fpscheme.New()
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions: envtest.CRDInstallOptions{
			CRDs:               crds,
			ErrorIfPathMissing: true,
			Scheme:             s,
		},
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("failed to start the embedded control plane (kube-apiserver and etcd from %s): %w", assets, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: s, env: env}, nil
}

// Stop stops kube-apiserver and etcd and removes their data directories.
func (e *Env) Stop() error {
	if e == nil || e.env == nil {
		return nil
	}
	return e.env.Stop()
}

// KubeconfigFile writes a kubeconfig for the admin user to path (mode 0600), for
// kubectl and for operator/agent processes started against this environment.
func (e *Env) KubeconfigFile(path string) error {
	user, err := e.env.ControlPlane.AddUser(envtest.User{Name: "fastpath-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("failed to add the admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("failed to render kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("failed to write kubeconfig %s: %w", path, err)
	}
	return nil
}

// NewNamespace creates a namespace with a generated name starting with prefix
// (one namespace per test) and returns its name.
func (e *Env) NewNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("failed to create namespace %s-*: %w", prefix, err)
	}
	return ns.Name, nil
}

// CRDs returns the fastpath.io CRDs followed by the KubeVirt and Multus fixtures.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	ours, err := crd.Bases()
	if err != nil {
		return nil, err
	}
	fx, err := crd.Decode(fixtures, "crds")
	if err != nil {
		return nil, err
	}
	return append(ours, fx...), nil
}

// RepoRoot returns the directory of the go.mod of github.com/fastpath-io/fastpath,
// searching upwards from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("failed to get the working directory: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && len(data) > 0 && containsModule(string(data)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("failed to find the fastpath repository root above the working directory")
		}
		dir = parent
	}
}

func containsModule(gomod string) bool {
	const want = "module github.com/fastpath-io/fastpath\n"
	return len(gomod) >= len(want) && gomod[:len(want)] == want
}
