package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/onsi/gomega"
)

// Command lines rejected before anything is built or imported exit 2.
func TestImagesRejectsBadCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"images", "build", "web"}, 2, `unknown image "web": want one of pause, operator, agent, bench, domain-hook`},
		{[]string{"images", "import", "pause"}, 2, `required flag(s) "address" not set`},
		{[]string{"images", "build", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"images", "push", "--tag", "1"}, 2, `required flag(s) "registry" not set`},
		{[]string{"images", "push", "--registry", "127.0.0.1:1/fp", "--tag", "1", "web"}, 2, `unknown image "web"`},
		{[]string{"images", "--help"}, 0, "import"},
		{[]string{"images", "--help"}, 0, "push"},
	} {
		g := gomega.NewWithT(t)
		var out, errb bytes.Buffer
		g.Expect(Main(context.Background(), tc.args, &out, &errb, deps{})).To(gomega.Equal(tc.code), "args %q: %s", tc.args, errb.String())
		g.Expect(errb.String()).To(gomega.ContainSubstring(tc.want), "args %q", tc.args)
	}
}
