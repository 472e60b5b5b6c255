package cluster

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/e2e/localenv/images"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// TestSiblingDevicePluginOnARealKubelet (root) runs the sibling device
// plugin against the REAL kubelet of a cluster brought up here: kubelet
// registers vsock.fastpath.io/sibling, calls Allocate and PreStartContainer,
// lists the holder through its PodResources API, and the container of a
// "launcher" pod (controlled by a VirtualMachineInstance that lists it in
// status.activePods; the VMI CRD is a stand-in, there is no KubeVirt) finds
// exactly its VM's socket at /var/run/fastpath/vsock and reaches the host's
// listener through it; a pod of no VMI finds the directory empty. The VMI's
// VirtualMachine carries the operator's wiring record and a
// FastPathAttachment lists it as wired in mode Sibling (the VM CRD is a
// stand-in too; the attachment CRD is Fastpath's).
func TestSiblingDevicePluginOnARealKubelet(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	imgs := t.TempDir()
	_, err = (&images.Builder{Root: root, Out: imgs}).Build(ctx, "pause")
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	c, opts, out, err := upForTest(ctx, t, root, "cluster-sib", imgs)
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	o, err := opts.withDefaults()
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("cluster up in %s", time.Since(start).Round(time.Millisecond))
	cl, err := adminClient(c.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())

	// The host's socket directory and db-0's vhost-user socket.
	sockDir, err := os.MkdirTemp("/var/run", "fpsib")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	name := filepath.Base(fastpathv1alpha1.SiblingSocketPath("default", "db-0"))
	ln, err := net.Listen("unix", filepath.Join(sockDir, name))
	g.Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	// What must NOT reach the container: db-0's hybrid host socket and
	// another VM's vhost-user socket.
	for _, other := range []string{strings.TrimSuffix(name, ".vhost") + ".vsock", filepath.Base(fastpathv1alpha1.SiblingSocketPath("default", "db-1"))} {
		l, err := net.Listen("unix", filepath.Join(sockDir, other))
		g.Expect(err).NotTo(HaveOccurred())
		defer l.Close()
	}
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
			accepted <- struct{}{}
		}
	}()

	mounts := &deviceplugin.SiblingMounts{SocketDir: sockDir, NodeName: c.NodeName, Devices: 4,
		PodResources: deviceplugin.KubeletPodResources{Socket: o.layout().kubeletPodResourcesSock()}, Reader: cl, Log: testr.New(t)}
	res, err := mounts.Resource()
	g.Expect(err).NotTo(HaveOccurred())
	srv := deviceplugin.NewServer(res, DevicePluginDir, filepath.Join(DevicePluginDir, "kubelet.sock"), 0, testr.New(t))
	g.Expect(srv.Start()).To(Succeed())
	defer srv.Stop()
	g.Eventually(func(g Gomega) {
		node := &corev1.Node{}
		g.Expect(cl.Get(ctx, client.ObjectKey{Name: c.NodeName}, node)).To(Succeed())
		q := node.Status.Allocatable[corev1.ResourceName(fastpathv1alpha1.SiblingResourceName)]
		g.Expect(q.Value()).To(BeEquivalentTo(4))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	// Stand-ins for KubeVirt's VM and VMI CRDs, with their status
	// subresource, and Fastpath's FastPathAttachment CRD.
	standIn := func(kind, plural string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".kubevirt.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "kubevirt.io", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
					Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}},
		}
	}
	crds := []*apiextensionsv1.CustomResourceDefinition{standIn("VirtualMachineInstance", "virtualmachineinstances"), standIn("VirtualMachine", "virtualmachines")}
	all, err := testenv.CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range all {
		if c.Name == "fastpathattachments.fastpath.io" {
			crds = append(crds, c)
		}
	}
	g.Expect(crds).To(HaveLen(3))
	for _, c := range crds {
		g.Expect(cl.Create(ctx, c)).To(Succeed())
		t.Cleanup(func() { _ = cl.Delete(context.Background(), c) })
	}
	// What the operator leaves when it wires db-0 in vsock mode Sibling:
	// the VM's wiring record and the attachment's status listing it. The
	// device plugin gives the socket only to the launcher of such a VM.
	att := &fastpathv1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec: fastpathv1alpha1.FastPathAttachmentSpec{VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Network: &fastpathv1alpha1.NetworkSpec{IPAM: fastpathv1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}}}
	g.Eventually(func() error { return cl.Create(ctx, att) }).WithTimeout(30 * time.Second).Should(Succeed())
	att.Status.VMs = []fastpathv1alpha1.VMStatus{{Name: "db-0", Wired: true, VSOCKMode: fastpathv1alpha1.VSOCKModeSibling}}
	g.Expect(cl.Status().Update(ctx, att)).To(Succeed())
	rec, err := json.Marshal(wiring.Record{Attachment: att.Name, AttachmentUID: string(att.UID),
		Added: []wiring.Item{wiring.ItemLabel, wiring.ItemVSOCKMode, wiring.ItemSiblingNode, wiring.ItemSiblingResource}})
	g.Expect(err).NotTo(HaveOccurred())
	vm := &unstructured.Unstructured{}
	vm.SetAPIVersion("kubevirt.io/v1")
	vm.SetKind("VirtualMachine")
	vm.SetNamespace("default")
	vm.SetName("db-0")
	vm.SetAnnotations(map[string]string{wiring.RecordAnnotation: string(rec)})
	g.Eventually(func() error { return cl.Create(ctx, vm) }).WithTimeout(30 * time.Second).Should(Succeed())
	vmi := &unstructured.Unstructured{}
	vmi.SetAPIVersion("kubevirt.io/v1")
	vmi.SetKind("VirtualMachineInstance")
	vmi.SetNamespace("default")
	vmi.SetName("db-0")
	vmi.SetAnnotations(map[string]string{fastpathv1alpha1.VSOCKModeAnnotation: string(fastpathv1alpha1.VSOCKModeSibling)})
	vmi.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "db-0", UID: vm.GetUID(), Controller: ptr.To(true)}})
	g.Eventually(func() error { return cl.Create(ctx, vmi) }).WithTimeout(30 * time.Second).Should(Succeed())

	pod := func(name string, owner *metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "compute", Image: SandboxImage, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceName(fastpathv1alpha1.SiblingResourceName): resource.MustParse("1")}}}},
			TerminationGracePeriodSeconds: ptr.To[int64](0)}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return p
	}
	launcher := pod("virt-launcher-db-0", &metav1.OwnerReference{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: "db-0", UID: vmi.GetUID(), Controller: ptr.To(true)})
	curious := pod("curious", nil)
	created := time.Now()
	g.Expect(cl.Create(ctx, launcher)).To(Succeed())
	g.Expect(cl.Create(ctx, curious)).To(Succeed())
	// What virt-controller does once the pod exists.
	g.Expect(unstructured.SetNestedStringMap(vmi.Object, map[string]string{string(launcher.UID): c.NodeName}, "status", "activePods")).To(Succeed())
	g.Expect(cl.Status().Update(ctx, vmi)).To(Succeed())

	for _, p := range []*corev1.Pod{launcher, curious} {
		g.Eventually(func(g Gomega) {
			g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(2*time.Minute).WithPolling(500*time.Millisecond).Should(Succeed(), p.Name)
	}
	t.Logf("launcher and curious Running %s after creation", time.Since(created).Round(time.Millisecond))

	// The launcher's container sees its VM's socket, and only it.
	dir := filepath.Join("/proc", containerPID(t, launcher), "root", fastpathv1alpha1.SiblingSocketDir)
	ents, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ents).To(HaveLen(1))
	g.Expect(ents[0].Name()).To(Equal(name))
	conn, err := net.Dial("unix", filepath.Join(dir, name))
	g.Expect(err).NotTo(HaveOccurred())
	conn.Close()
	g.Eventually(accepted, 5*time.Second).Should(Receive())
	// The other pod's container: an empty directory.
	ents, err = os.ReadDir(filepath.Join("/proc", containerPID(t, curious), "root", fastpathv1alpha1.SiblingSocketDir))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ents).To(BeEmpty())

	for _, p := range []*corev1.Pod{launcher, curious} {
		g.Expect(cl.Delete(ctx, p)).To(Succeed())
	}
}

// containerPID returns a process of pod p whose root has
// v1alpha1.SiblingSocketDir (its container, not its sandbox): kubelet's
// cgroupfs driver puts the pod's processes under .../pod<uid>/.
func containerPID(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range procs {
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cg), "pod"+string(p.UID)) {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", e.Name(), "root", fastpathv1alpha1.SiblingSocketDir)); err == nil {
			return e.Name()
		}
	}
	t.Fatalf("no process of pod %s (uid %s) has %s", p.Name, p.UID, fastpathv1alpha1.SiblingSocketDir)
	return ""
}
