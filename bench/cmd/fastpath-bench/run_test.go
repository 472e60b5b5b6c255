package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// fakeSSH is an `ssh` for tests: it records the target (user@host, from
// "-l user -- host") in $FAKE_SSH_LOG and runs the command on this machine,
// so a "client VM" is this machine under another address. Any other word
// before "--" fails it: nothing but the runner's own options may come there.
const fakeSSH = `#!/bin/sh
user=
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-i) shift 2 ;;
    -l) user=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "fake ssh: unexpected word before --: $1" >&2; exit 255 ;;
  esac
done
echo "$user@$1" >> "$FAKE_SSH_LOG"
shift
exec sh -c "$*"
`

// installFakeSSH puts fakeSSH first in PATH and returns its log file.
func installFakeSSH(t *testing.T) (log, key string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(fakeSSH), 0o755); err != nil {
		t.Fatalf("failed to write fake ssh: %v", err)
	}
	key = filepath.Join(dir, "id")
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatalf("failed to write key: %v", err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	log = filepath.Join(dir, "ssh.log")
	t.Setenv("FAKE_SSH_LOG", log)
	return log, key
}

// deadEndpoint returns a loopback host:port nobody listens on.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("failed to listen: %v", err)
	}
	ep := l.Addr().String()
	l.Close()
	return ep
}

var quickStream = []string{"run", "--tests", "TCP_STREAM", "--socket-sizes", "0", "--message-sizes", "4K", "--sessions", "1", "--duration", "1s", "--repetitions", "1", "--quiet"}

// VM mode: pair i's netperf runs on client VM i over SSH (a fake ssh that
// runs it here), against server i of each path.
func TestRunVMModeRunsEachPairOnItsClientVM(t *testing.T) {
	g := gomega.NewWithT(t)
	sshLog, key := installFakeSSH(t)
	a, b := startNetserver(t), startNetserver(t)
	args := append(append([]string(nil), quickStream...), "--pairs", "1,2", "--path", "fastpath="+a.Endpoint()+","+b.Endpoint(),
		"--ssh-clients", "192.0.2.1,192.0.2.2", "--ssh-user", "fedora", "--ssh-key", key)
	code, stdout, stderr := run(args...)
	g.Expect(code).To(gomega.Equal(0), stderr)
	doc, err := results.Decode(strings.NewReader(stdout))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Runs).To(gomega.HaveLen(2))
	g.Expect(doc.Runs[0].Pairs).To(gomega.Equal(1))
	g.Expect(doc.Runs[0].MTU).To(gomega.BeZero(), "VM mode does not guess the guest's MTU")
	g.Expect(doc.Runs[1].Pairs).To(gomega.Equal(2))
	g.Expect(doc.Runs[1].PerPairThroughputMbps).To(gomega.HaveLen(2))
	var eps []string
	for _, s := range doc.Runs[1].Samples[0].PerSession {
		eps = append(eps, fmt.Sprintf("%d=%s", s.Pair, s.Endpoint))
	}
	g.Expect(eps).To(gomega.Equal([]string{"1=" + a.Endpoint(), "2=" + b.Endpoint()}))
	logged, err := os.ReadFile(sshLog)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	// Each client VM's SSH readiness probe (WaitForGuests), then each
	// pair's netserver probe from its client VM (WaitForNetservers), then
	// on client VM 1 netperf -V and the read of its negotiated offloads
	// (GuestOffloads), then pair 1 alone, then pairs 1 and 2 at once.
	lines := strings.Fields(string(logged))
	g.Expect(lines).To(gomega.HaveLen(9))
	g.Expect(lines[:2]).To(gomega.ConsistOf("fedora@192.0.2.1", "fedora@192.0.2.2"))
	g.Expect(lines[2:4]).To(gomega.ConsistOf("fedora@192.0.2.1", "fedora@192.0.2.2"))
	g.Expect(lines[4:6]).To(gomega.Equal([]string{"fedora@192.0.2.1", "fedora@192.0.2.1"}))
	g.Expect(lines[6:]).To(gomega.ConsistOf("fedora@192.0.2.1", "fedora@192.0.2.1", "fedora@192.0.2.2"))

	// A server VM without netserver: after --ssh-wait the error says so,
	// naming the client VM, the server and its port.
	dead := deadEndpoint(t)
	host, port, _ := net.SplitHostPort(dead)
	args = append(append([]string(nil), quickStream...), "--path", "fastpath="+dead, "--ssh-clients", "192.0.2.1", "--ssh-user", "fedora", "--ssh-key", key, "--ssh-wait", "1s")
	code, stdout, stderr = run(args...)
	g.Expect(code).To(gomega.Equal(1))
	g.Expect(stdout).To(gomega.BeEmpty())
	g.Expect(stderr).To(gomega.ContainSubstring("netserver is not answering within 1s"))
	g.Expect(stderr).To(gomega.ContainSubstring("ssh fedora@192.0.2.1 -> " + host + ":" + port + ": "))
	g.Expect(stderr).To(gomega.ContainSubstring("VM mode: is netserver running in the server VM"))
}

func getData(t *testing.T, c client.Client, ns, name string) map[string]string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
		t.Fatalf("failed to get ConfigMap %s/%s: %v", ns, name, err)
	}
	return cm.Data
}

// The outcome goes into the results ConfigMap as benchjob's contract says,
// against a real API server (envtest) reached through $KUBECONFIG.
func TestRunWritesTheOutcomeToTheResultsConfigMap(t *testing.T) {
	g := gomega.NewWithT(t)
	env, err := testenv.Start(testenv.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("failed to stop the control plane: %v", err)
		}
	})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.KubeconfigFile(kubeconfig)).To(gomega.Succeed())
	t.Setenv("KUBECONFIG", kubeconfig)
	ctx := context.Background()
	ns, err := env.NewNamespace(ctx, "fpb")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	name := benchjob.ResultsConfigMapName("quick")
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(gomega.Succeed())
	n := startNetserver(t)
	cm := ns + "/" + name

	// Success: results.json and runID; the same document as on stdout.
	code, stdout, stderr := run(append(append([]string(nil), quickStream...), "--path", "baseline="+n.Endpoint(), "--results-configmap", cm, "--run-id", "quick-run-1")...)
	g.Expect(code).To(gomega.Equal(0), stderr)
	data := getData(t, env.Client, ns, name)
	g.Expect(data).To(gomega.HaveLen(2))
	g.Expect(data[benchjob.RunIDKey]).To(gomega.Equal("quick-run-1"))
	stored, err := results.Decode(strings.NewReader(data[benchjob.ResultsKey]))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	printed, err := results.Decode(strings.NewReader(stdout))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(stored.Runs).To(gomega.Equal(printed.Runs))
	g.Expect(stored.Runs[0].ThroughputMbps).To(gomega.BeNumerically(">", 0))

	// Failure of a later run: error and errorReason replace results.json.
	dead := deadEndpoint(t)
	code, stdout, stderr = run(append(append([]string(nil), quickStream...), "--path", "baseline="+dead, "--results-configmap", cm, "--run-id", "quick-run-2")...)
	g.Expect(code).To(gomega.Equal(1))
	g.Expect(stdout).To(gomega.BeEmpty())
	g.Expect(stderr).To(gomega.ContainSubstring("netserver is not answering"))
	data = getData(t, env.Client, ns, name)
	g.Expect(data).To(gomega.HaveLen(3))
	g.Expect(data[benchjob.RunIDKey]).To(gomega.Equal("quick-run-2"))
	g.Expect(data[benchjob.ErrorReasonKey]).To(gomega.Equal(benchjob.ErrorReasonNetserverUnreachable))
	g.Expect(data[benchjob.ErrorKey]).To(gomega.ContainSubstring("failed to run netperf against " + dead + " via local"))
	g.Expect(data[benchjob.ErrorKey]).NotTo(gomega.ContainSubstring("\n"))

	// Any other failure is RunnerFailed: here netperf is missing.
	code, _, _ = run(append(append([]string(nil), quickStream...), "--path", "baseline="+n.Endpoint(), "--netperf", "/nonexistent/netperf", "--results-configmap", cm, "--run-id", "quick-run-3")...)
	g.Expect(code).To(gomega.Equal(1))
	data = getData(t, env.Client, ns, name)
	g.Expect(data[benchjob.RunIDKey]).To(gomega.Equal("quick-run-3"))
	g.Expect(data[benchjob.ErrorReasonKey]).To(gomega.Equal(benchjob.ErrorReasonRunnerFailed))
	g.Expect(data[benchjob.ErrorKey]).To(gomega.ContainSubstring("netperf is not installed"))

	// A command line the runner rejects (the contract drifted): RunnerFailed.
	code, _, stderr = run("run", "--path", "baseline="+n.Endpoint(), "--frobnicate", "1", "--results-configmap", cm, "--run-id", "quick-run-5")
	g.Expect(code).To(gomega.Equal(2))
	g.Expect(stderr).To(gomega.ContainSubstring("unknown flag: --frobnicate"))
	data = getData(t, env.Client, ns, name)
	g.Expect(data[benchjob.RunIDKey]).To(gomega.Equal("quick-run-5"))
	g.Expect(data[benchjob.ErrorReasonKey]).To(gomega.Equal(benchjob.ErrorReasonRunnerFailed))
	g.Expect(data[benchjob.ErrorKey]).To(gomega.ContainSubstring("runner rejected its command line: unknown flag: --frobnicate"))

	// A ConfigMap that does not exist: the run fails, but stdout keeps the JSON.
	code, stdout, stderr = run(append(append([]string(nil), quickStream...), "--path", "baseline="+n.Endpoint(), "--results-configmap", ns+"/missing", "--run-id", "quick-run-4")...)
	g.Expect(code).To(gomega.Equal(1))
	g.Expect(stderr).To(gomega.ContainSubstring("failed to write the outcome of run quick-run-4 to ConfigMap " + ns + "/missing"))
	_, err = results.Decode(strings.NewReader(stdout))
	g.Expect(err).NotTo(gomega.HaveOccurred())
}
