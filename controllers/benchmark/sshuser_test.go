package benchmark_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// The API server refuses an sshUser the runner could read as an ssh option
// (issue 39, item 3), naming the field and the allowed form.
var _ = Describe("FastPathBenchmark sshUser", func() {
	It("refuses anything but a POSIX user name, naming the field and the form", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		for i, bad := range []string{"-oProxyCommand=touch /tmp/pwned", "--", "-l", "cloud user", "a;id", "root@10.0.0.1", "$(id)", "1abc"} {
			b := podBenchmark(ns, fmt.Sprintf("baduser-%d", i), "db-link")
			b.Spec.Mode = fastpathv1alpha1.BenchmarkModeVM
			b.Spec.SSHUser = bad
			b.Spec.Client, b.Spec.Server = fastpathv1alpha1.BenchmarkEndpoint{VM: "c"}, fastpathv1alpha1.BenchmarkEndpoint{VM: "s"}
			b.Spec.SSHKeySecretRef = &fastpathv1alpha1.LocalObjectReference{Name: "key"}
			err := k8s.Create(ctx, b)
			Expect(err).To(HaveOccurred(), bad)
			Expect(err.Error()).To(ContainSubstring("spec.sshUser"), bad)
			Expect(err.Error()).To(ContainSubstring("sshUser must be a POSIX user name"), bad)
		}
		for i, good := range []string{"fedora", "cloud-user", "_svc.bench"} {
			b := podBenchmark(ns, fmt.Sprintf("gooduser-%d", i), "db-link")
			b.Spec.Mode = fastpathv1alpha1.BenchmarkModeVM
			b.Spec.SSHUser = good
			b.Spec.Client, b.Spec.Server = fastpathv1alpha1.BenchmarkEndpoint{VM: "c"}, fastpathv1alpha1.BenchmarkEndpoint{VM: "s"}
			b.Spec.SSHKeySecretRef = &fastpathv1alpha1.LocalObjectReference{Name: "key"}
			Expect(k8s.Create(ctx, b)).To(Succeed(), good)
		}
	})
})
