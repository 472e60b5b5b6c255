package cliflags

import (
	"flag"
	"io"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantPos []string
		wantO   string
	}{
		{"flags first", []string{"-o", "dir", "a.json"}, []string{"a.json"}, "dir"},
		{"flags after positionals", []string{"a.json", "-o", "dir", "b"}, []string{"a.json", "b"}, "dir"},
		{"double dash ends flags", []string{"a", "--", "-o", "x"}, []string{"a", "-o", "x"}, ""},
		{"no args", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o := fs.String("o", "", "")
			pos, err := Parse(fs, tc.args)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pos).To(Equal(tc.wantPos))
			g.Expect(*o).To(Equal(tc.wantO))
		})
	}
}

func TestParseErrors(t *testing.T) {
	g := NewWithT(t)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, err := Parse(fs, []string{"a", "-h"})
	g.Expect(err).To(MatchError(flag.ErrHelp))
	_, err = Parse(fs, []string{"a", "--nope"})
	g.Expect(err).To(MatchError(ContainSubstring("nope")))
}
