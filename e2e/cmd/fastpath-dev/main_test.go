package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/onsi/gomega"
)

// The root lists the subcommands, rejects unknown ones and shared flags
// reach every subcommand; the soak rejects its bad flags before it starts.
func TestMainRootAndSoakCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "soak"},
		{[]string{"nope"}, 2, `fastpath-dev: unknown command "nope"`},
		{[]string{"soak", "--help"}, 0, "--plugin-cycles"},
		{[]string{"soak", "--help"}, 0, "--v int"},
		{[]string{"soak", "--bogus"}, 2, "fastpath-dev soak: unknown flag: --bogus"},
		{[]string{"soak", "--plugin-cycles", "many"}, 2, `invalid argument "many"`},
	} {
		g := gomega.NewWithT(t)
		var out, errb bytes.Buffer
		g.Expect(Main(context.Background(), tc.args, &out, &errb, deps{})).To(gomega.Equal(tc.code), "args %q: %s", tc.args, errb.String())
		g.Expect(errb.String()).To(gomega.ContainSubstring(tc.want), "args %q", tc.args)
	}
}
