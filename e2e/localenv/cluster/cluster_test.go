package cluster

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/e2e/localenv/images"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestUpPodDown brings a real cluster up, runs a pod on it through Multus and
// the bridge plugin, and takes it down: nothing of it may be left on the host.
func TestUpPodDown(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	imgs := t.TempDir()
	_, err = (&images.Builder{Root: root, Out: imgs}).Build(ctx, "pause")
	g.Expect(err).NotTo(HaveOccurred())
	netnsBefore := netnsNames(t)
	c, opts, out, err := upForTest(ctx, t, root, "cluster-test", imgs)
	g.Expect(err).NotTo(HaveOccurred(), out.String())

	cl, err := adminClient(c.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	pod := runPausePod(ctx, g, cl)
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(DefaultPodCIDR.Contains(ip)).To(BeTrue(), "pod IP %s in %s", ip, DefaultPodCIDR)
	// Multus wrote the network status of its delegate, the pod network.
	var status []struct {
		Name    string   `json:"name"`
		IPs     []string `json:"ips"`
		Default bool     `json:"default"`
	}
	g.Expect(json.Unmarshal([]byte(pod.Annotations["k8s.v1.cni.cncf.io/network-status"]), &status)).To(Succeed())
	g.Expect(status).To(ConsistOf(And(HaveField("Name", PodNetworkName), HaveField("Default", true), HaveField("IPs", ConsistOf(ip.String())))))
	br, err := net.InterfaceByName(PodBridge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(br.MTU).To(Equal(PodMTU))
	g.Expect(netnsNames(t)).NotTo(Equal(netnsBefore), "the pod has a network namespace")
	// The aggregation layer is configured: aggregated API servers (virt-api)
	// find the front proxy's CA and allowed name where they look.
	auth := &corev1.ConfigMap{}
	g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "extension-apiserver-authentication"}, auth)).To(Succeed())
	g.Expect(auth.Data).To(And(HaveKeyWithValue("requestheader-client-ca-file", ContainSubstring("BEGIN CERTIFICATE")),
		HaveKeyWithValue("requestheader-allowed-names", ContainSubstring(FrontProxyClientName))))

	g.Expect(Down(ctx, opts)).To(Succeed(), out.String())
	left, err := Leftovers(opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeEmpty())
	g.Expect(netnsNames(t)).To(Equal(netnsBefore))
	_, err = net.InterfaceByName(PodBridge)
	g.Expect(err).To(HaveOccurred(), "bridge %s is gone", PodBridge)
}

// TestUpKubeVirtLayoutDown: with Options.KubeVirt the kubelet's root is
// /var/lib/kubelet and it and /var/run/kubevirt are shared mounts (what
// virt-handler's Bidirectional mounts need), and so is /; a pod runs; Down
// unmounts and removes both and gives / its propagation back, leaving
// nothing. An existing /var/lib/kubelet is refused
// before anything starts.
func TestUpKubeVirtLayoutDown(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	for _, dir := range []string{KubeVirtKubeletRoot, KubeVirtRunDir} {
		if _, err := os.Lstat(dir); err == nil {
			t.Fatalf("%s exists on this machine: the test needs to make it (and must not touch another kubelet's)", dir)
		}
	}
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	imgs := t.TempDir()
	_, err = (&images.Builder{Root: root, Out: imgs}).Build(ctx, "pause")
	g.Expect(err).NotTo(HaveOccurred())

	rootWasShared, err := rootShared()
	g.Expect(err).NotTo(HaveOccurred())
	out := &strings.Builder{}
	opts := Options{Dir: filepath.Join(root, "_out", "cluster-kubevirt-test"), BinDir: filepath.Join(root, "bin"), ImagesDir: imgs, Out: out, KubeVirt: true}
	t.Cleanup(func() {
		if err := Down(context.Background(), opts); err != nil {
			t.Errorf("Down: %v", err)
		}
		t.Log(out.String())
	})
	c, err := Up(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	for _, dir := range []string{KubeVirtKubeletRoot, resolvedPath(KubeVirtRunDir)} {
		g.Expect(sharedMount(t, dir)).To(BeTrue(), "%s is a shared mount", dir)
	}
	g.Expect(rootShared()).To(BeTrue(), "/ is shared: containerd looks up /var/run/kubevirt without resolving /var/run")
	cl, err := adminClient(c.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	pod := runPausePod(ctx, g, cl)
	g.Expect(filepath.Join(KubeVirtKubeletRoot, "pods", string(pod.UID))).To(BeADirectory(), "the kubelet's root is /var/lib/kubelet")

	// A second cluster is refused: the directories are the first one's.
	_, err = Up(ctx, Options{Dir: filepath.Join(root, "_out", "cluster-kubevirt-test-2"), BinDir: opts.BinDir, ImagesDir: imgs, KubeVirt: true})
	g.Expect(err).To(MatchError(ContainSubstring("/var/lib/kubelet exists")))

	g.Expect(Down(ctx, opts)).To(Succeed(), out.String())
	left, err := Leftovers(opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(BeEmpty())
	for _, dir := range []string{KubeVirtKubeletRoot, KubeVirtRunDir} {
		_, err := os.Lstat(dir)
		g.Expect(err).To(MatchError(os.ErrNotExist), "%s removed", dir)
	}
	g.Expect(rootShared()).To(Equal(rootWasShared), "/ has its propagation from before Up")
}

// runPausePod creates the pause pod in default and waits (2 minutes at
// most) until it is Running; it returns the pod as last read.
func runPausePod(ctx context.Context, g Gomega, cl client.Client) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "pause", Image: SandboxImage, ImagePullPolicy: corev1.PullNever}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	g.Expect(cl.Create(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return pod
}

// sharedMount reports whether dir is a mount point in a shared peer group
// (mountinfo's optional field shared:N).
func sharedMount(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 6 && f[4] == dir {
			for _, opt := range f[6:] {
				if opt == "-" {
					break
				}
				if strings.HasPrefix(opt, "shared:") {
					return true
				}
			}
		}
	}
	return false
}

// upForTest brings a cluster up in <root>/_out/<dir> with the image
// archives in imgs, and registers a cleanup that takes it down (Down is
// idempotent, so a test may also call it), fails the test when Leftovers
// finds anything, and logs the cluster's output. It returns Up's cluster
// and error, the options and that output.
func upForTest(ctx context.Context, t *testing.T, root, dir, imgs string) (*Cluster, Options, *strings.Builder, error) {
	t.Helper()
	out := &strings.Builder{}
	opts := Options{Dir: filepath.Join(root, "_out", dir), BinDir: filepath.Join(root, "bin"), ImagesDir: imgs, Out: out}
	c, err := Up(ctx, opts)
	t.Cleanup(func() {
		if err := Down(context.Background(), opts); err != nil {
			t.Errorf("Down: %v", err)
		}
		if left, err := Leftovers(opts); err != nil || len(left) > 0 {
			t.Errorf("left behind: %v %v", left, err)
		}
		t.Log(out.String())
	})
	return c, opts, out, err
}

func netnsNames(t *testing.T) []string {
	ents, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "cni-") {
			out = append(out, e.Name())
		}
	}
	return out
}
