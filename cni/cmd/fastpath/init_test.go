package main

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
)

// slowInit are packages whose init work the plugin must not pay on every
// CNI call (docs/benchmarks.md §4): OpenTelemetry, net/http and crypto/tls
// (its init work and dozens of packages under it) come in with
// containernetworking/cni's invoke, which the plugin replaces with a few
// functions of its own (cni/pkg/plugin ipamExec). knftables and
// go-iptables, which compile regular expressions at init, still come in
// with containernetworking/plugins' pkg/ip and pkg/ipam: the plugin uses
// that library as it is rather than a copy of it.
var slowInit = []string{
	"github.com/containernetworking/cni/pkg/invoke",
	"go.opentelemetry.io/otel/trace",
	"net/http",
	"crypto/tls",
}

// TestBinaryInit runs the built plugin with GODEBUG=inittrace=1 and checks
// that none of slowInit is initialised.
func TestBinaryInit(t *testing.T) {
	g := NewWithT(t)
	_, stderr, err := cnitest.Exec(context.Background(), bins.Plugin(), []string{"GODEBUG=inittrace=1", "CNI_COMMAND=VERSION"}, nil)
	g.Expect(err).NotTo(HaveOccurred(), "stderr %s", stderr)
	var inits []string
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 1 && f[0] == "init" {
			inits = append(inits, f[1])
		}
	}
	g.Expect(inits).To(ContainElement("main"), "inittrace lists the packages initialised: %s", stderr)
	for _, p := range slowInit {
		g.Expect(inits).NotTo(ContainElement(p))
	}
}
