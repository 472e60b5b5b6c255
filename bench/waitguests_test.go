package bench

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
)

// fakeSSH puts an ssh on PATH that fails (as sshd refusing the connection
// would) until it has been run failures times for a target, then succeeds;
// the guest 192.0.2.99 never answers. It records every call in dir/calls.
func fakeSSH(t *testing.T, failures int) string {
	prev := sshRetryInterval
	sshRetryInterval = 10 * time.Millisecond
	t.Cleanup(func() { sshRetryInterval = prev })
	dir := t.TempDir()
	script := `#!/bin/sh
# ssh -l <user> -- <host> <command>: the target is the word after "--".
prev=""; for a in "$@"; do [ "$prev" = "--" ] && target="$a"; prev="$a"; done
echo "$target $*" >>"` + dir + `/calls"
n=$(grep -c "^$target " "` + dir + `/calls")
case "$target" in 192.0.2.99) echo "ssh: connect to host 192.0.2.99 port 22: Connection refused" >&2; exit 255;; esac
if [ "$n" -le ` + strconv.Itoa(failures) + ` ]; then echo "ssh: connect to host port 22: Connection refused" >&2; exit 255; fi
exit 0
`
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return filepath.Join(dir, "calls")
}

func TestWaitForGuestsRetriesUntilSSHAnswers(t *testing.T) {
	g := NewWithT(t)
	calls := fakeSSH(t, 2)
	c := RunConfig{SSHClients: guests("10.0.0.1"), SSHServers: guests("10.0.0.2", "10.0.0.1"), SSHUser: "fedora", SSHKey: "/k", SSHWait: time.Minute}
	g.Expect(c.WaitForGuests(context.Background(), logr.Discard())).To(Succeed())
	b, err := os.ReadFile(calls)
	g.Expect(err).NotTo(HaveOccurred())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// Two refusals and one success for each of the two distinct guests.
	g.Expect(lines).To(HaveLen(6))
	g.Expect(lines).To(HaveEach(And(ContainSubstring("BatchMode=yes"), ContainSubstring("-i /k"), ContainSubstring("-l fedora -- 10.0.0."), HaveSuffix(" true"))))
}

func TestWaitForGuestsNamesTheGuestThatNeverAnswers(t *testing.T) {
	g := NewWithT(t)
	fakeSSH(t, 0)
	c := RunConfig{SSHClients: guests("10.0.0.1", "192.0.2.99"), SSHUser: "fedora", SSHKey: "/k", SSHWait: time.Second}
	err := c.WaitForGuests(context.Background(), logr.Discard())
	g.Expect(err).To(MatchError(And(
		ContainSubstring("failed to reach the guests over SSH within 1s"),
		ContainSubstring("fedora@192.0.2.99: exit status 255: ssh: connect to host 192.0.2.99 port 22: Connection refused"),
		Not(ContainSubstring("fedora@10.0.0.1")))))
}

// guests returns fedora@addr for each address.
func guests(addrs ...string) []SSHGuest {
	var out []SSHGuest
	for _, a := range addrs {
		out = append(out, SSHGuest{User: "fedora", Addr: netip.MustParseAddr(a)})
	}
	return out
}
