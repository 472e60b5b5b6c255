package bench

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/bench/netperf"
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

// fakeNetserverHost answers netperf's probe as a netserver that is not yet
// listening (netperf's own message) until it has been asked failures
// times, then answers; host 192.0.2.99 never listens, 192.0.2.98 fails
// another way (a broken path, left to the measurement).
type fakeNetserverHost struct {
	failures int
	calls    map[string]int
	argv     [][]string
}

func (f *fakeNetserverHost) String() string { return "fake" }

func (f *fakeNetserverHost) Run(_ context.Context, argv []string) ([]byte, []byte, error) {
	f.argv = append(f.argv, argv)
	host := argv[slices.Index(argv, "-H")+1]
	f.calls[host]++
	switch {
	case host == "192.0.2.98":
		return []byte("netperf: send_omni: send_data failed: Connection reset by peer\n"), nil, errors.New("exit status 1")
	case host == "192.0.2.99" || f.calls[host] <= f.failures:
		return []byte("establish control: are you sure there is a netserver listening on " + host + " at port 12865?\n"), nil, errors.New("exit status 1")
	}
	return []byte("1234.5\n"), nil, nil
}

func TestWaitForNetserversRetriesUntilNetserverAnswers(t *testing.T) {
	g := NewWithT(t)
	fakeSSH(t, 0) // only for its short retry interval
	f := &fakeNetserverHost{failures: 2, calls: map[string]int{}}
	paths := []Path{
		{Name: "fastpath", Endpoints: []Endpoint{{Executor: f, Host: "10.0.0.2"}, {Executor: f, Host: "10.0.0.3", Port: 12866}}},
		{Name: "vsock", VSock: true, Endpoints: []Endpoint{{Executor: f, Host: "192.0.2.99"}}},
		{Name: "broken", Endpoints: []Endpoint{{Executor: f, Host: "192.0.2.98"}}},
	}
	c := RunConfig{SSHClients: guests("10.0.0.1"), SSHWait: time.Minute, Netperf: "/opt/netperf", Matrix: Matrix{Tests: []string{"TCP_STREAM"}}}
	g.Expect(c.WaitForNetservers(context.Background(), logr.Discard(), paths)).To(Succeed())
	g.Expect(f.calls).To(Equal(map[string]int{"10.0.0.2": 3, "10.0.0.3": 3, "192.0.2.98": 1}), "two refusals then an answer; the vsock path is not probed; another failure ends the wait")
	g.Expect(f.argv).To(ContainElement([]string{"/opt/netperf", "-H", "10.0.0.3", "-t", "TCP_RR", "-l", "1", "-P", "0", "-p", "12866"}))
}

func TestWaitForNetserversNamesTheServerThatNeverAnswers(t *testing.T) {
	g := NewWithT(t)
	fakeSSH(t, 0)
	f := &fakeNetserverHost{calls: map[string]int{}}
	paths := []Path{{Name: "fastpath", Endpoints: []Endpoint{{Executor: f, Host: "10.0.0.2"}, {Executor: f, Host: "192.0.2.99"}}}}
	c := RunConfig{SSHClients: guests("10.0.0.1"), SSHWait: time.Second, Matrix: Matrix{Tests: []string{"TCP_STREAM"}}}
	err := c.WaitForNetservers(context.Background(), logr.Discard(), paths)
	g.Expect(err).To(MatchError(netperf.ErrNetserverUnreachable))
	g.Expect(err).To(MatchError(And(ContainSubstring("within 1s"), ContainSubstring("fake -> 192.0.2.99:0"), Not(ContainSubstring("10.0.0.2")))))
}
