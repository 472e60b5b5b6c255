package apiprobe

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

func fake(resources ...string) *fakediscovery.FakeDiscovery {
	d := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}}
	if len(resources) > 0 {
		l := &metav1.APIResourceList{GroupVersion: "kubevirt.io/v1"}
		for _, r := range resources {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: r})
		}
		d.Resources = []*metav1.APIResourceList{l}
	}
	return d
}

// switching serves the resources of served once on is set.
type switching struct {
	*fakediscovery.FakeDiscovery
	served *fakediscovery.FakeDiscovery
	on     atomic.Bool
}

func (s *switching) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if s.on.Load() {
		return s.served.ServerResourcesForGroupVersion(gv)
	}
	return s.FakeDiscovery.ServerResourcesForGroupVersion(gv)
}

func TestServed(t *testing.T) {
	g := NewWithT(t)
	ok, err := Served(fake(), "kubevirt.io/v1", "virtualmachines")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "group version not served")

	ok, err = Served(fake("virtualmachines"), "kubevirt.io/v1", "virtualmachines", "virtualmachineinstances")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "one resource missing")

	ok, err = Served(fake("virtualmachines", "virtualmachineinstances"), "kubevirt.io/v1", "virtualmachines", "virtualmachineinstances")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())

	broken := fake()
	broken.AddReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	_, err = Served(broken, "kubevirt.io/v1", "virtualmachines")
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
}

func TestRestartWhenServed(t *testing.T) {
	g := NewWithT(t)
	d := &switching{FakeDiscovery: fake(), served: fake("virtualmachines")}
	r := RestartWhenServed(d, 10*time.Millisecond, "kubevirt.io/v1", "virtualmachines")
	done := make(chan error, 1)
	go func() { done <- r.Start(context.Background()) }()
	g.Consistently(done, 100*time.Millisecond).ShouldNot(Receive(), "nothing served yet")
	d.on.Store(true)
	var err error
	g.Eventually(done, time.Second).Should(Receive(&err))
	g.Expect(errors.Is(err, ErrAppeared)).To(BeTrue())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Expect(RestartWhenServed(fake(), time.Hour, "kubevirt.io/v1", "virtualmachines").Start(ctx)).To(Succeed(), "a stop is no error")
}
