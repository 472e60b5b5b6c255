package wellknown_test

import (
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// ValidSSHUser and SSHUserPattern agree, and nothing that ssh could read as
// an option, or a shell as more than one word, is a user name.
func TestValidSSHUser(t *testing.T) {
	re := regexp.MustCompile(wellknown.SSHUserPattern)
	for _, tc := range []struct {
		user string
		ok   bool
	}{
		{"fedora", true},
		{"cloud-user", true},
		{"_svc.bench", true},
		{"Admin2", true},
		{strings.Repeat("a", wellknown.SSHUserMaxLength), true},
		{strings.Repeat("a", wellknown.SSHUserMaxLength+1), false},
		{"", false},
		{"-oProxyCommand=touch /tmp/pwned", false},
		{"-l", false},
		{"--", false},
		{"a b", false},
		{"root;id", false},
		{"user@evil", false},
		{"$(id)", false},
		{"1abc", false},
		{".hidden", false},
		{"tab\tuser", false},
		{"new\nline", false},
		{"ünï", false},
	} {
		g := NewWithT(t)
		g.Expect(wellknown.ValidSSHUser(tc.user)).To(Equal(tc.ok), "%q", tc.user)
		if len(tc.user) <= wellknown.SSHUserMaxLength && tc.user != "" {
			g.Expect(re.MatchString(tc.user)).To(Equal(tc.ok), "the pattern and the function disagree on %q", tc.user)
		}
	}
}
