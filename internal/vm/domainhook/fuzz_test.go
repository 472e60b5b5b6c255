package domainhook

import (
	"strconv"
	"testing"
)

// FuzzOnDefineDomainAnnotation feeds arbitrary fastpath.io/tuning values
// through the whole hook on the KubeVirt fixture. Whatever the value, the hook
// either fails and returns nothing, or returns a well-formed domain in which
// only the two interfaces (ua-fp-db-link, ua-default) may differ and every
// value written on ua-fp-db-link is one libvirt and vhost-net accept. `go test` runs the seeds; explore with
// `go test -run '^$' -fuzz FuzzOnDefineDomainAnnotation ./internal/domainhook`.
func FuzzOnDefineDomainAnnotation(f *testing.F) {
	for _, seed := range []string{
		`{"interfaces":{"fp-db-link":{"mtu":9000,"queues":4,"rxQueueSize":1024,"txQueueSize":256,"offloads":{"tso":"On","gso":"On","gro":"On","txChecksum":"On"}}}}`,
		`{"interfaces":{"fp-db-link":{"queues":300,"rxQueueSize":128}}}`,
		`{"interfaces":{"fp-db-link":{"mtu":65535,"offloads":{"gro":"Off"}},"default":{"mtu":1280}}}`,
		`{"interfaces":{"fp-db-link":{"txQueueSize":512}}}`,
		`{"interfaces":{"":{}}}`,
		`{"interfaces":null}`,
		`{"interfaces":{"fp-db-link":{"mtu":-1}}}`,
		`{"interfaces":{"fp-db-link":{"queues":1e3}}}`,
		`[]`, `null`, ``, `{`, `"x"`,
	} {
		f.Add(seed)
	}
	domain := readFixture(f, fixtureKubeVirt)
	wantOthers := canonicalWithout(f, domain, "ua-fp-db-link", "ua-default")
	vcpus := 4 // <vcpu> of the fixture

	f.Fuzz(func(t *testing.T, value string) {
		res, err := OnDefineDomain(vmiWithAnnotation(t, value, false), domain)
		if err != nil {
			if res.Domain != nil || res.Changes != nil || res.Warnings != nil {
				t.Fatalf("error %v came with a result %+v", err, res)
			}
			return
		}
		if got := canonicalWithout(t, res.Domain, "ua-fp-db-link", "ua-default"); got != wantOthers {
			t.Fatalf("annotation %q changed more than the interfaces:\n%s", value, res.Domain)
		}
		fp := iface(parseDoc(t, res.Domain), "ua-fp-db-link")
		if fp == nil {
			t.Fatalf("annotation %q removed ua-fp-db-link", value)
		}
		d := attrs(child(fp, "driver"))
		if v, ok := d["rx_queue_size"]; ok && v != "256" && v != "512" && v != "1024" {
			t.Fatalf("annotation %q wrote rx_queue_size=%s", value, v)
		}
		if v, ok := d["tx_queue_size"]; ok && v != "256" {
			t.Fatalf("annotation %q wrote tx_queue_size=%s", value, v)
		}
		if v, ok := d["queues"]; ok {
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > vcpus {
				t.Fatalf("annotation %q wrote queues=%s", value, v)
			}
		}
		if v := attrs(child(fp, "mtu"))["size"]; v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < 1280 || n > 9000 {
				t.Fatalf("annotation %q wrote mtu size=%s (pod MTU 9000)", value, v)
			}
		}
		for _, side := range []string{"driver/host", "driver/guest"} {
			for k, v := range attrs(child(fp, side)) {
				if v != "on" && v != "off" {
					t.Fatalf("annotation %q wrote %s %s=%s", value, side, k, v)
				}
			}
		}
	})
}
