package attachment

import (
	"errors"
	"testing"

	"github.com/onsi/gomega"
)

func TestParsePortRange(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    PortRange
		wantErr string
	}{
		{in: "20000-29999", want: PortRange{First: 20000, Last: 29999}},
		{in: " 5 - 5 ", want: PortRange{First: 5, Last: 5}},
		{in: "1-4294967294", want: PortRange{First: 1, Last: 4294967294}},
		{in: "20000", wantErr: "want first-last"},
		{in: "a-b", wantErr: "invalid syntax"},
		{in: "0-10", wantErr: "must satisfy"},
		{in: "10-9", wantErr: "must satisfy"},
		{in: "1-4294967295", wantErr: "must satisfy"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			g := gomega.NewWithT(t)
			got, err := ParsePortRange(tc.in)
			if tc.wantErr != "" {
				g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(got).To(gomega.Equal(tc.want))
		})
	}
}

func TestPortAllocator(t *testing.T) {
	g := gomega.NewWithT(t)
	a := newPortAllocator(PortRange{First: 100, Last: 104}, 0)

	// Lowest free ports, skipping ports other attachments claim in status.
	claimed := claimsFrom(map[string]int64{"ns/other/x": 101})
	got, err := a.assign("ns/a", []string{"db", "web"}, nil, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(map[string]int64{"db": 100, "web": 102}))

	// Stable: the same answer again, even when the status is not written yet.
	got, err = a.assign("ns/a", []string{"db", "web"}, nil, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(map[string]int64{"db": 100, "web": 102}))

	// Another attachment does not get a port this process already gave out.
	got, err = a.assign("ns/b", []string{"db"}, nil, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(map[string]int64{"db": 103}))

	// Dropping a service releases its port.
	got, err = a.assign("ns/a", []string{"db"}, nil, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(map[string]int64{"db": 100}))
	got, err = a.assign("ns/c", []string{"s1", "s2", "s3"}, nil, claimed)
	g.Expect(err).To(gomega.MatchError(errPortsExhausted))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("service s3 in 100-104")))
	g.Expect(got).To(gomega.Equal(map[string]int64{"s1": 102, "s2": 104}))

	// Releasing an attachment frees all of its ports.
	a.release("ns/c")
	a.release("ns/b")
	got, err = a.assign("ns/d", []string{"s"}, nil, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(map[string]int64{"s": 102}))
}

func TestPortAllocatorAfterRestart(t *testing.T) {
	g := gomega.NewWithT(t)
	// A fresh process: the statuses in the cache are the only memory.
	a := newPortAllocator(PortRange{First: 100, Last: 199}, 0)
	statuses := map[string]int64{"ns/a/db": 150, "ns/b/db": 150, "ns/c/db": 120}
	claimed := claimsFrom(statuses)

	got, err := a.assign("ns/a", []string{"db"}, map[string]int64{"db": 150}, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(map[string]int64{"db": 150}), "the previous port is kept")

	// A duplicate claim (two statuses, one port) is resolved for the smaller key.
	got, err = a.assign("ns/b", []string{"db"}, map[string]int64{"db": 150}, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(map[string]int64{"db": 100}))

	// A previous port outside the (changed) range is replaced.
	got, err = a.assign("ns/e", []string{"db"}, map[string]int64{"db": 5000}, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.Equal(map[string]int64{"db": 101}))
	g.Expect(errors.Is(err, errPortsExhausted)).To(gomega.BeFalse())
}

// TestPortAllocatorNamespaceCap: one namespace's owners together hold at most
// the cap, counting ports claimed in statuses; other namespaces are served.
func TestPortAllocatorNamespaceCap(t *testing.T) {
	g := gomega.NewWithT(t)
	a := newPortAllocator(PortRange{First: 100, Last: 199}, 3)
	claimed := claimsFrom(map[string]int64{"a/old/s": 150}) // another owner of namespace a, from its status
	got, err := a.assign("a/x", []string{"s1", "s2", "s3"}, nil, claimed)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("service s3: namespace a holds 3 relay ports, its cap")))
	g.Expect(errors.Is(err, errNamespacePorts)).To(gomega.BeTrue())
	g.Expect(got).To(gomega.Equal(map[string]int64{"s1": 100, "s2": 101}))
	_, err = a.assign("a/y", []string{"s"}, nil, claimed)
	g.Expect(err).To(gomega.MatchError(errNamespacePorts), "a/x's ports count against a/y")
	got, err = a.assign("b/z", []string{"s1", "s2", "s3"}, nil, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "namespace b has its own share")
	g.Expect(got).To(gomega.HaveLen(3))
	// a/x drops a service: a/y gets the freed share.
	_, err = a.assign("a/x", []string{"s1"}, nil, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	got, err = a.assign("a/y", []string{"s"}, nil, claimed)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.HaveKey("s"))
}
