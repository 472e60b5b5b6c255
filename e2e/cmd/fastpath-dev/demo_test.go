package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/e2e/localenv/demo"
)

func TestMainParsesFlagsAndRunsTheDemo(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		code    int
		want    string
		ran     bool
		runErr  error
		wantOpt demo.Options
	}{
		{[]string{"demo", "extra"}, 2, "demo takes no arguments", false, nil, demo.Options{}},
		{[]string{"demo", "--bogus"}, 2, "unknown flag: --bogus", false, nil, demo.Options{}},
		{[]string{"demo", "--help"}, 0, "--full", false, nil, demo.Options{}},
		{[]string{"demo"}, 0, "", true, nil, demo.Options{}},
		{[]string{"demo", "--full"}, 0, "", true, nil, demo.Options{Full: true}},
		{[]string{"demo", "--guests=qemu"}, 0, "", true, nil, demo.Options{Guests: "qemu"}},
		{[]string{"demo"}, 1, "fastpath-dev demo: the benchmark failed", true, errors.New("the benchmark failed"), demo.Options{}},
	} {
		g := gomega.NewWithT(t)
		var out, errb bytes.Buffer
		var got *demo.Options
		run := func(_ context.Context, o demo.Options) error { got = &o; return tc.runErr }
		g.Expect(Main(context.Background(), tc.args, &out, &errb, deps{runDemo: run})).To(gomega.Equal(tc.code), "args %q: %s", tc.args, errb.String())
		g.Expect(errb.String()).To(gomega.ContainSubstring(tc.want), "args %q", tc.args)
		g.Expect(got != nil).To(gomega.Equal(tc.ran), "args %q", tc.args)
		if got != nil {
			g.Expect(got.Full).To(gomega.Equal(tc.wantOpt.Full))
			g.Expect(got.Out).To(gomega.BeIdenticalTo(&out), "the demo prints on stdout")
		}
	}
}
