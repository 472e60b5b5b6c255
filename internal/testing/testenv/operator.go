package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"
)

// OperatorUser is the user fastpath-operator's ServiceAccount
// (fastpath-system/fastpath-operator) authenticates as. The envtest suites
// run their operator as it, by impersonation, so that a write the
// deployment's RBAC does not allow fails the suite too.
const OperatorUser = "system:serviceaccount:fastpath-system:fastpath-operator"

// BindOperatorRoles creates the generated ClusterRole config/rbac/role.yaml
// and extra (e.g. a grant the chart adds), and binds each of them to
// OperatorUser's ServiceAccount.
func (e *Env) BindOperatorRoles(ctx context.Context, extra ...*rbacv1.ClusterRole) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	path := filepath.Join(root, "config", "rbac", "role.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", path, err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		return fmt.Errorf("failed to decode %s: %w", path, err)
	}
	for _, r := range append([]*rbacv1.ClusterRole{role}, extra...) {
		if err := e.Client.Create(ctx, r); err != nil {
			return fmt.Errorf("failed to create ClusterRole %s: %w", r.Name, err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "fastpath-system", Name: "fastpath-operator"}},
		}
		if err := e.Client.Create(ctx, binding); err != nil {
			return fmt.Errorf("failed to create ClusterRoleBinding %s: %w", r.Name, err)
		}
	}
	return nil
}

// StartManager starts a controller-runtime manager on cfg as OperatorUser
// (impersonated), with the Env's scheme, no metrics or health endpoints and
// without controller name validation (a suite starts one manager after
// another in one process), once setup has registered its controllers. The
// returned stop cancels the manager, waits until it stopped and returns
// what its Start returned.
func (e *Env) StartManager(cfg *rest.Config, setup func(ctrl.Manager) error) (stop func() error, err error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: OperatorUser}
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the manager: %w", err)
	}
	if err := setup(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var result error
	stopped := false
	return func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}, nil
}
