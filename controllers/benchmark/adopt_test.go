package benchmark_test

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Issue 24 item 3: an edit user could name a FastPathBenchmark after an
// existing Role, RoleBinding, ServiceAccount or ConfigMap it could not write
// ("<name>-runner", "<name>-results"); CreateOrUpdate adopted it, rewrote it
// and the garbage collector deleted it with the benchmark. The controller now
// creates those objects and refuses to touch one it does not control.
var _ = Describe("FastPathBenchmark runner objects", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	// snapshot is the object as the API server stores it, as JSON.
	snapshot := func(obj client.Object) func() string {
		return func() string {
			fresh := obj.DeepCopyObject().(client.Object)
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), fresh)).To(Succeed())
			data, err := json.Marshal(fresh)
			Expect(err).NotTo(HaveOccurred())
			return string(data)
		}
	}

	refuses := func(name string, foreign client.Object, kind string) {
		Expect(k8s.Create(ctx, foreign)).To(Succeed())
		before := snapshot(foreign)()

		createReadyAttachment(ctx, ns, "db-link")
		Expect(k8s.Create(ctx, podBenchmark(ns, name, "db-link"))).To(Succeed())

		By("staying Pending with RunnerObjectConflict naming the object, and a Warning Event")
		Eventually(getBenchmark(ctx, ns, name)).Should(And(havePhase(pending),
			haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonRunnerObjectConflict)))
		Expect(conditionMessage(getBenchmark(ctx, ns, name)(), fastpathv1alpha1.RunningCondition)).To(
			ContainSubstring(kind + " " + ns + "/" + foreign.GetName() + " exists and is not controlled by this benchmark"))
		Eventually(eventReasons(ctx, ns, name)).Should(ContainElement("Warning/" + fastpathv1alpha1.ReasonRunnerObjectConflict))

		By("leaving the object byte for byte as it was, and running nothing")
		Consistently(snapshot(foreign), 2*time.Second, 100*time.Millisecond).Should(Equal(before))
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: benchjob.JobName(name, 1)}, &batchv1.Job{})).To(Satisfy(apierrors.IsNotFound))
		Expect(serverPods(ctx, ns, name)()).To(BeEmpty())

		By("going on once the object is gone, with one of its own")
		Expect(k8s.Delete(ctx, foreign)).To(Succeed())
		Eventually(func() bool {
			mine := foreign.DeepCopyObject().(client.Object)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), mine); err != nil {
				return false
			}
			return metav1.IsControlledBy(mine, getBenchmark(ctx, ns, name)())
		}).Should(BeTrue())
		Eventually(serverPods(ctx, ns, name)).ShouldNot(BeEmpty())
	}

	It("does not adopt an existing RoleBinding <name>-runner", func() {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "quick-runner", Namespace: ns, Labels: map[string]string{"team": "platform"}},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: ns}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		}
		refuses("quick", rb, "RoleBinding")
	})

	It("does not adopt an existing Role <name>-runner", func() {
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "quick-runner", Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}},
		}
		refuses("quick", role, "Role")
	})

	It("does not adopt an existing ServiceAccount <name>-runner", func() {
		refuses("quick", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quick-runner", Namespace: ns,
			Annotations: map[string]string{"owner": "someone else"}}}, "ServiceAccount")
	})

	It("does not adopt an existing ConfigMap <name>-results", func() {
		refuses("quick", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "quick-results", Namespace: ns},
			Data: map[string]string{"app.conf": "keep me"}}, "ConfigMap")
	})
})
