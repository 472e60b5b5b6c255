package metricsauth

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// The flags' defaults: secure, with a self-signed certificate.
func TestFlagsDefaults(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Register(fs, ":8443", "test metrics")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	o := f.ServerOptions()
	if !o.SecureServing || o.FilterProvider == nil || o.BindAddress != ":8443" || o.CertDir != "" {
		t.Errorf("defaults = %+v, want secure serving with the authn/authz filter on :8443", o)
	}
	if err := fs.Parse([]string{"--metrics-secure=false", "--metrics-bind-address=:8080"}); err != nil {
		t.Fatal(err)
	}
	if o := f.ServerOptions(); o.SecureServing || o.FilterProvider != nil || o.BindAddress != ":8080" {
		t.Errorf("--metrics-secure=false gives %+v, want plain HTTP on :8080", o)
	}
}

// Against a real API server: the secure endpoint refuses a caller without a
// token (401) and one whose ServiceAccount may not GET /metrics (403), and
// serves one bound to a metrics-reader ClusterRole; the plain endpoint
// serves anyone.
func TestSecureEndpoint(t *testing.T) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	secureAddr, plainAddr := freeAddr(t), freeAddr(t)
	startManager(ctx, t, env, Flags{BindAddress: secureAddr, Secure: true})
	startManager(ctx, t, env, Flags{BindAddress: plainAddr, Secure: false})

	ns, err := env.NewNamespace(ctx, "metricsauth")
	if err != nil {
		t.Fatal(err)
	}
	reader := serviceAccountToken(ctx, t, cs, ns, "reader")
	denied := serviceAccountToken(ctx, t, cs, ns, "denied")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + ns},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, url, token string
		want             []int
	}{
		{"no token", "https://" + secureAddr + "/metrics", "", []int{http.StatusUnauthorized}},
		// controller-runtime's filter answers 500 "Authentication failed" when
		// the TokenReview itself fails, as it does for a malformed token.
		{"a token the API server does not know", "https://" + secureAddr + "/metrics", "not-a-token", []int{http.StatusUnauthorized, http.StatusInternalServerError}},
		{"a ServiceAccount without the role", "https://" + secureAddr + "/metrics", denied, []int{http.StatusForbidden}},
		{"a ServiceAccount with the role", "https://" + secureAddr + "/metrics", reader, []int{http.StatusOK}},
		{"plain HTTP, no token", "http://" + plainAddr + "/metrics", "", []int{http.StatusOK}},
	} {
		code, body := get(ctx, t, tc.url, tc.token)
		if !slices.Contains(tc.want, code) {
			t.Errorf("%s: GET %s = %d, want %v (%.200s)", tc.name, tc.url, code, tc.want, body)
		}
		if served := strings.Contains(body, "# HELP "); served != (code == http.StatusOK) {
			t.Errorf("%s: GET %s = %d with metrics in the body: %v", tc.name, tc.url, code, served)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startManager runs a manager with no controllers whose metrics endpoint
// uses f, until ctx ends, and waits until the endpoint accepts connections.
func startManager(ctx context.Context, t *testing.T, env *testenv.Env, f Flags) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: f.ServerOptions()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("manager with metrics on %s: %v", f.BindAddress, err)
		}
	})
	// The manager signals nothing when its metrics server listens (it binds
	// inside its Start), so the real condition is polled: a connection is
	// accepted. 30 s is a hang guard, not a speed target.
	NewWithT(t).Eventually(func() error {
		c, err := net.DialTimeout("tcp", f.BindAddress, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "metrics endpoint %s never listened", f.BindAddress)
}

// serviceAccountToken creates ServiceAccount ns/name and returns a token for it.
func serviceAccountToken(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("failed to request a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

func get(ctx context.Context, t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The endpoint's certificate is self-signed, as on a cluster without --metrics-cert-dir.
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(fmt.Errorf("GET %s: reading the body: %w", url, err))
	}
	return resp.StatusCode, string(b)
}
