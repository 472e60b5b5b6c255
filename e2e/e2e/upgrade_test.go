package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/e2e/localenv/cluster"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// upgradeTag is the tag the upgrade spec gives the running operator, agent
// and vsock backend images in the cluster's registry: the same code
// retagged, as the issue allows, so that the pods roll because their image
// changes. It is new in every run (the suite's namespace names the run), as
// a release's tag is: the chart pulls IfNotPresent, so a node that kept an
// image of an earlier run under a reused tag would start that image instead
// (it did: an agent without a flag the chart now passes, crash-looping).
func upgradeTag() string { return "e2e-upgrade-" + strings.TrimPrefix(ns, "fastpath-e2e-") }

// upgradeField is the optional FastPathAttachment field the upgraded chart's
// CRD adds (spec.<upgradeField>, a string): served after the upgrade,
// pruned before.
const upgradeField = "e2eUpgradeNote"

// netperfInterim matches netperf's demo-mode lines (-D):
// "Interim result: 13798.76 10^6bits/s over 1.284 seconds ending at ...".
var netperfInterim = regexp.MustCompile(`Interim result:\s+([0-9.]+) 10\^6bits/s over ([0-9.]+) seconds`)

// helmCmd runs the repository's helm with args against the suite's cluster.
func helmCmd(ctx SpecContext, root string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "helm"), args...).CombinedOutput()
	return string(out), err
}

// upgradedChart copies the chart at src into a new directory and gives its
// FastPathAttachment CRD the optional spec.<upgradeField> and the chart a new
// version: "a changed CRD" of the issue, with nothing else changed.
func upgradedChart(src, dir string) error {
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		return err
	}
	crd := filepath.Join(dir, "files", "crds", "fastpath.io_fastpathattachments.yaml")
	data, err := os.ReadFile(crd)
	if err != nil {
		return err
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return err
	}
	versions, _, err := unstructured.NestedSlice(obj, "spec", "versions")
	if err != nil || len(versions) == 0 {
		return fmt.Errorf("%s: no spec.versions: %v", crd, err)
	}
	for i := range versions {
		v := versions[i].(map[string]any)
		if err := unstructured.SetNestedField(v, map[string]any{"type": "string", "description": "e2e: a field only the upgraded chart has."},
			"schema", "openAPIV3Schema", "properties", "spec", "properties", upgradeField); err != nil {
			return err
		}
	}
	if err := unstructured.SetNestedSlice(obj, versions, "spec", "versions"); err != nil {
		return err
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	if err := os.WriteFile(crd, out, 0o644); err != nil {
		return err
	}
	chart := filepath.Join(dir, "Chart.yaml")
	data, err = os.ReadFile(chart)
	if err != nil {
		return err
	}
	re := regexp.MustCompile(`(?m)^version: (\S+)$`)
	if !re.Match(data) {
		return fmt.Errorf("%s has no version line", chart)
	}
	return os.WriteFile(chart, re.ReplaceAll(data, []byte("version: ${1}-"+upgradeTag())), 0o644)
}

// Issue 38: helm upgrade to new operator and agent images and a changed CRD
// while a TCP stream runs between two VMs over the fast path and, on a
// cluster in vsock mode Sibling, a vsock stream between them through the
// vsock backend, whose pod and process the upgrade must leave alone.
var _ = Describe("An upgrade of Fastpath under traffic", Ordered, func() {
	var (
		root     string
		network  *fastpathv1alpha1.FastPathNetwork
		att      *fastpathv1alpha1.FastPathAttachment
		revision int
		registry string // <host>[/path] the running images come from
	)
	c := func() client.Client { return env.Client() }
	names := []string{"up-0", "up-1"}

	// served reports whether the API server keeps spec.<upgradeField> of a
	// FastPathAttachment (a server-side dry run: nothing is created).
	served := func(ctx SpecContext) bool {
		GinkgoHelper()
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: fastpath.io/v1alpha1
kind: FastPathAttachment
metadata: {name: upgrade-probe, namespace: %s}
spec:
  vmSelector: {matchLabels: {app: upgrade-probe}}
  networkRef: {name: %s}
  network: {ipam: {subnet: 10.252.9.0/24}}
  %s: served
`, ns, network.Name, upgradeField)), &u.Object)).To(Succeed())
		Expect(c().Create(ctx, u, client.DryRunAll)).To(Succeed())
		_, found, err := unstructured.NestedString(u.Object, "spec", upgradeField)
		Expect(err).NotTo(HaveOccurred())
		return found
	}

	BeforeAll(func(ctx SpecContext) {
		if env.Emulated() || !env.KubeVirt() {
			notRun(NoKubeVirt + "; or the local stack, which has no Helm release to upgrade")
		}
		var err error
		root, err = testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		out, err := helmCmd(ctx, root, "status", cluster.Release, "-n", cluster.Namespace, "-o", "json")
		if err != nil {
			notRun("Fastpath is not a Helm release here (make cluster-install KUSTOMIZE=1 applies it with kustomize): " + strings.TrimSpace(out))
		}
		var st struct {
			Version int `json:"version"`
		}
		Expect(json.Unmarshal([]byte(out), &st)).To(Succeed(), out)
		revision = st.Version

		// Where the running operator's image comes from (make
		// cluster-install: the cluster's registry, by digest).
		pods := &corev1.PodList{}
		Expect(c().List(ctx, pods, client.InNamespace(cluster.Namespace))).To(Succeed())
		for _, p := range pods.Items {
			for _, ct := range p.Spec.Containers {
				if m := fastpathImage.FindStringSubmatch(ct.Image); m != nil && m[3] == "operator" {
					registry = m[1] + m[2]
				}
			}
		}
		if registry == "" {
			notRun("the operator's image is not <registry>/fastpath-operator@sha256:… (make cluster-install pushes it to the cluster's registry)")
		}

		for _, s := range objs.Secrets {
			s := s.DeepCopy()
			s.ResourceVersion, s.UID = "", ""
			if err := c().Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		}
		network = objs.Network.DeepCopy()
		network.ObjectMeta = metav1.ObjectMeta{Name: "e2e-up-" + ns}
		network.Spec.Bridge = "fpup0"
		Expect(c().Create(ctx, network)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c().Delete(ctx, network))).To(Succeed()) })
		att = newAttachment("up-link", "up", network.Name, "10.252.0.0/24", fastpathv1alpha1.PlacementRequired)
		if env.VSOCKMode() == fastpathv1alpha1.VSOCKModeSibling {
			// A sibling vsock stream runs across the upgrade too
			// (upgrade_vsock_test.go). In mode Relay the relay lives in the
			// agent, which the upgrade restarts: not covered here.
			att.Spec.VSOCK = siblingUpgradeVSOCK(names[0])
		}
		DeferCleanup(func(ctx SpecContext) { removeVMs(ctx, att, names...) }, NodeTimeout(4*time.Minute))
		startWired(ctx, att, newVM(names[0], "up", ""), newVM(names[1], "up", ""))
	}, NodeTimeout(8*time.Minute))

	It("keeps a 60-s TCP stream over the fast path, and a sibling vsock stream with its backend process, through helm upgrade to new images and a CRD with a new field", func(ctx SpecContext) {
		server := &kubevirtv1.VirtualMachineInstance{}
		vmiUIDs := map[string]types.UID{}
		for _, n := range names {
			v := &kubevirtv1.VirtualMachineInstance{}
			Expect(c().Get(ctx, nsKey(n), v)).To(Succeed())
			vmiUIDs[n] = v.UID
			if n == names[0] {
				server = v
			}
		}
		ip := ""
		for _, i := range server.Status.Interfaces {
			if i.Name == fastpathv1alpha1.NetworkName(att.Name) {
				ip = i.IP
			}
		}
		Expect(ip).NotTo(BeEmpty(), "VMI %s has no address on the fast path: %+v", names[0], server.Status.Interfaces)
		Expect(served(ctx)).To(BeFalse(), "before the upgrade the API server prunes spec.%s (else this spec could not fail)", upgradeField)

		// The chart and the images of the upgrade.
		chart := filepath.Join(GinkgoT().TempDir(), "fastpath")
		Expect(upgradedChart(filepath.Join(root, "charts", "fastpath"), chart)).To(Succeed())
		sibling := env.VSOCKMode() == fastpathv1alpha1.VSOCKModeSibling
		retag := []string{"operator", "agent"}
		if sibling {
			// The backend's DaemonSet template changes too; OnDelete must
			// keep its pods anyway.
			retag = append(retag, "vsock-backend")
		}
		for _, comp := range retag {
			src := fmt.Sprintf("%s/fastpath-%s:local", registry, comp)
			Expect(crane.Tag(src, upgradeTag(), crane.Insecure, crane.WithContext(ctx))).To(Succeed(), "retag %s", src)
		}

		// Both guests answer SSH before the stream starts, so that the
		// stream's 60 s are not spent logging in.
		for _, n := range names {
			out, err := env.GuestExec(ctx, nsKey(n), "", "true")
			Expect(err).NotTo(HaveOccurred(), "ssh into %s: %s", n, out)
		}
		var (
			stream  *vsockStream
			backend vsockBackendState
		)
		if sibling {
			a := &fastpathv1alpha1.FastPathAttachment{}
			Expect(c().Get(ctx, nsKey(att.Name), a)).To(Succeed())
			Expect(a.Status.VSOCKServices).To(HaveLen(1))
			Expect(a.Status.VSOCKServices[0].Mode).To(Equal(fastpathv1alpha1.VSOCKModeSibling))
			cid, port := vsockAddress(a.Status.VSOCKServices[0].Address)
			backend = siblingBackendState(ctx, c(), server.Status.NodeName, ns+"/"+att.Name)
			By(fmt.Sprintf("starting a sibling vsock stream of %d MiB from %s to %d:%d (backend pod %s, vhost-device-vsock pid %d)",
				upgradeVsockChunks, names[1], cid, port, backend.pod, backend.pid))
			stream = startVsockStream(ctx, names[0], names[1], cid, port)
		}
		By("starting netperf TCP_STREAM for 60 s from " + names[1] + " to " + ip + " over the fast path")
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			defer GinkgoRecover()
			out, err := env.GuestExec(ctx, nsKey(names[1]), "", "netperf -H "+ip+" -t TCP_STREAM -l 60 -D 5 -f m -- -m 65536")
			done <- result{out, err}
		}()
		// The stream runs once the server's netserver holds a connection
		// from the client besides its listener (port 12865 = 0x3241; state
		// 01 = ESTABLISHED in /proc/net/tcp).
		var early *result
		eventually(ctx, func(g Gomega) {
			select {
			case r := <-done:
				early = &r
				return
			default:
			}
			out, err := env.GuestExec(ctx, nsKey(names[0]), "", "grep ':3241 ' /proc/net/tcp /proc/net/tcp6 | grep -c ' 01 ' || true")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(strings.TrimSpace(out)).NotTo(Equal("0"), "no established netperf control connection on %s yet", names[0])
		}, 2*time.Minute).Should(Succeed())
		Expect(early).To(BeNil(), "netperf ended before the upgrade began: %+v", early)

		By("helm upgrade to the retagged images and the chart whose CRD has spec." + upgradeField)
		DeferCleanup(func(ctx SpecContext) {
			// Back to the install make cluster-install made (by digest), so
			// that the specs after this one see it.
			out, err := helmCmd(ctx, root, "rollback", cluster.Release, strconv.Itoa(revision), "-n", cluster.Namespace, "--wait", "--timeout", "5m")
			Expect(err).NotTo(HaveOccurred(), out)
		}, NodeTimeout(6*time.Minute))
		start := time.Now()
		upgrade := []string{"upgrade", cluster.Release, chart, "-n", cluster.Namespace, "--reuse-values",
			"--set", "image.tag=" + upgradeTag(), "--set", "image.operator.digest=", "--set", "image.agent.digest=",
			"--wait", "--timeout", "5m"}
		if sibling {
			upgrade = append(upgrade, "--set", "image.vsockBackend.digest=")
		}
		out, err := helmCmd(ctx, root, upgrade...)
		Expect(err).NotTo(HaveOccurred(), out)
		upgradeTook := time.Since(start)

		By("waiting for the stream to end")
		var r result
		Eventually(ctx, done).WithTimeout(3 * time.Minute).Should(Receive(&r))
		Expect(r.err).NotTo(HaveOccurred(), "netperf across the upgrade: %s", r.out)
		var interim []string
		for _, m := range netperfInterim.FindAllStringSubmatch(r.out, -1) {
			interim = append(interim, m[1])
		}
		final := regexp.MustCompile(`(?m)^\s*\d+\s+\d+\s+\d+\s+([0-9.]+)\s+([0-9.]+)\s*$`).FindStringSubmatch(r.out)
		Expect(final).To(HaveLen(3), "netperf's result line: %s", r.out)
		secs, _ := strconv.ParseFloat(final[1], 64)
		Expect(secs).To(BeNumerically(">=", 59), "the stream ran its 60 s: %s", r.out)
		AddReportEntry("upgrade under traffic", fmt.Sprintf("helm upgrade (operator and agent rolled, CRD changed) took %s; netperf TCP_STREAM %s s at %s Mbit/s on average, 5-s interim Mbit/s: %s (emulated CPU, QEMU TCG; MTU 9000, offloads on both sides)",
			upgradeTook.Round(100*time.Millisecond), final[1], final[2], strings.Join(interim, ", ")))

		if sibling {
			By("waiting for the sibling vsock stream and checking its bytes and the backend")
			entry := stream.finish(ctx, start, start.Add(upgradeTook))
			after := siblingBackendState(ctx, c(), backend.node, ns+"/"+att.Name)
			Expect(after.podUID).To(Equal(backend.podUID), "the vsock backend pod %s on %s was not replaced (updateStrategy OnDelete)", backend.pod, backend.node)
			Expect(after.pid).To(Equal(backend.pid), "vhost-device-vsock of %s kept its process", att.Name)
			ds := &appsv1.DaemonSet{}
			Expect(c().Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: "fastpath-vsock-backend"}, ds)).To(Succeed())
			Expect(ds.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":"+upgradeTag()), "the upgrade changed the backend's template, and its pod stayed")
			AddReportEntry("sibling vsock across the upgrade", fmt.Sprintf("%s; backend pod %s (uid %s) and vhost-device-vsock pid %d unchanged",
				entry, backend.pod, backend.podUID, backend.pid))
		} else {
			AddReportEntry("sibling vsock across the upgrade", "not run: the cluster's vsock mode is "+string(env.VSOCKMode())+" (a relayed stream across the upgrade is not measured here)")
		}

		By("checking what the upgrade left")
		pods := &corev1.PodList{}
		Expect(c().List(ctx, pods, client.InNamespace(cluster.Namespace))).To(Succeed())
		rolled := map[string]int{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			for _, ct := range p.Spec.Containers {
				for _, comp := range []string{"operator", "agent"} {
					if ct.Image == fmt.Sprintf("%s/fastpath-%s:%s", registry, comp, upgradeTag()) {
						rolled[comp]++
					}
				}
			}
		}
		Expect(rolled).To(And(HaveKey("operator"), HaveKey("agent")), "pods on the upgraded images: %v", rolled)
		Expect(served(ctx)).To(BeTrue(), "after the upgrade the API server keeps spec.%s", upgradeField)
		for _, n := range names {
			v := &kubevirtv1.VirtualMachineInstance{}
			Expect(c().Get(ctx, nsKey(n), v)).To(Succeed())
			Expect(v.UID).To(Equal(vmiUIDs[n]), "VMI %s was not restarted", n)
		}
		eventually(ctx, func(g Gomega) {
			l := &fastpathv1alpha1.FastPathNodeList{}
			g.Expect(c().List(ctx, l)).To(Succeed())
			g.Expect(l.Items).NotTo(BeEmpty())
			for _, n := range l.Items {
				cond := apimeta.FindStatusCondition(n.Status.Conditions, fastpathv1alpha1.ReadyCondition)
				g.Expect(cond).NotTo(BeNil(), "FastPathNode %s", n.Name)
				g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "FastPathNode %s: %s: %s", n.Name, cond.Reason, cond.Message)
			}
			a := &fastpathv1alpha1.FastPathAttachment{}
			g.Expect(c().Get(ctx, nsKey(att.Name), a)).To(Succeed())
			cond := apimeta.FindStatusCondition(a.Status.Conditions, fastpathv1alpha1.ReadyCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "%s: %s", cond.Reason, cond.Message)
		}, 2*time.Minute).Should(Succeed())
	}, SpecTimeout(12*time.Minute))

	It("ends a sibling vsock stream with a reset, not a hang, when the node's backend pod is replaced, and tells each running VM it needs a restart", func(ctx SpecContext) {
		if env.VSOCKMode() != fastpathv1alpha1.VSOCKModeSibling {
			notRun("the cluster's vsock mode is " + string(env.VSOCKMode()) + ", not Sibling")
		}
		report := backendReplacedUnderStream(ctx, c(), att, names)
		AddReportEntry("sibling backend replaced", report)
	}, SpecTimeout(6*time.Minute))
})
