package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/e2e/localenv/cluster"
)

// The sibling vsock stream of the upgrade spec (issue 38 item 3): one guest
// sends upgradeVsockChunks chunks of a known pattern, one a second, to the
// other's vsock service through vsock mode Sibling's backend, across the
// helm upgrade; the receiver's byte count and sha256 must be the sender's.
const (
	// upgradeVsockPort is the vsock port the receiving guest listens on.
	upgradeVsockPort = 7100
	// upgradeVsockLine is the pattern: `yes` repeats it; 32 bytes, so a
	// 1-MiB chunk is 32768 whole lines.
	upgradeVsockLine = "fastpath-e2e-upgrade-0123456789\n"
	// upgradeVsockChunk is one chunk, bytes.
	upgradeVsockChunk = 1 << 20
	// upgradeVsockChunks is how many chunks, one a second: longer than
	// the upgrade (helm --wait rolls the operator and the agents) so the
	// stream spans it; the spec checks that it did.
	upgradeVsockChunks = 240
	// upgradeVsockComponent is the vsock backend pods' component label.
	upgradeVsockComponent = "vsock-backend"
)

// upgradeVsockSum is the sha256 (hex) of the whole stream.
func upgradeVsockSum() string {
	chunk := []byte(strings.Repeat(upgradeVsockLine, upgradeVsockChunk/len(upgradeVsockLine)))
	h := sha256.New()
	for range upgradeVsockChunks {
		h.Write(chunk)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// siblingUpgradeVSOCK is the vsock service the upgrade attachment gets in
// mode Sibling: the stream's receiver is the first VM.
func siblingUpgradeVSOCK(receiver string) *fastpathv1alpha1.VSOCKSpec {
	return &fastpathv1alpha1.VSOCKSpec{Mode: fastpathv1alpha1.VSOCKModeSibling,
		Services: []fastpathv1alpha1.VSOCKService{{Name: "upgrade-stream", VM: receiver, Port: upgradeVsockPort}}}
}

// vsockBackendState is what must not change across the upgrade: the node's
// vsock backend pod and the vhost-device-vsock process of the attachment.
type vsockBackendState struct {
	node   string
	podUID types.UID
	pod    string
	pid    int64
}

// siblingBackendState reads the backend pod on node and the PID
// FastPathNode node reports for attachment key (status.siblingBackends).
func siblingBackendState(ctx SpecContext, c client.Client, node, key string) vsockBackendState {
	GinkgoHelper()
	st := vsockBackendState{node: node}
	eventually(ctx, func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(c.List(ctx, pods, client.InNamespace(cluster.Namespace),
			client.MatchingLabels{"app.kubernetes.io/component": upgradeVsockComponent})).To(Succeed())
		var here []corev1.Pod
		for _, p := range pods.Items {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
				here = append(here, p)
			}
		}
		g.Expect(here).To(HaveLen(1), "one vsock backend pod on node %s", node)
		st.podUID, st.pod = here[0].UID, here[0].Name
		fpn := &fastpathv1alpha1.FastPathNode{}
		g.Expect(c.Get(ctx, types.NamespacedName{Name: node}, fpn)).To(Succeed())
		var b *fastpathv1alpha1.SiblingBackendStatus
		for i := range fpn.Status.SiblingBackends {
			if fpn.Status.SiblingBackends[i].Attachment == key {
				b = &fpn.Status.SiblingBackends[i]
			}
		}
		g.Expect(b).NotTo(BeNil(), "FastPathNode %s lists the backend of %s: %+v", node, key, fpn.Status.SiblingBackends)
		g.Expect(b.Running).To(BeTrue(), "%s: %s", key, b.Message)
		g.Expect(b.PID).NotTo(BeZero())
		st.pid = b.PID
	}, 2*time.Minute).Should(Succeed())
	return st
}

// vsockStream is the running sibling stream.
type vsockStream struct {
	receiver, sender string
	started          time.Time
	done             chan vsockStreamResult
}

type vsockStreamResult struct {
	out   string
	err   error
	ended time.Time
}

// startVsockStream starts the receiver (socat on the service port into
// dd, which counts, and sha256sum) and then the sender, which writes the
// chunks to cid:port; it returns once the sender runs.
func startVsockStream(ctx SpecContext, receiver, sender string, cid, port uint32) *vsockStream {
	GinkgoHelper()
	log := "/tmp/fastpath-e2e-upgrade-vsock.log"
	// wc counts the bytes through a FIFO beside sha256sum (busybox's dd,
	// the guest's, prints records, not bytes).
	// The log goes first: waitListening must not read an earlier stream's.
	recv := fmt.Sprintf(`rm -f /tmp/fp-up.sum /tmp/fp-up.count /tmp/fp-up.fifo %[2]s; mkfifo /tmp/fp-up.fifo; nohup sh -c 'wc -c </tmp/fp-up.fifo >/tmp/fp-up.count & socat -d -d -u VSOCK-LISTEN:%[1]d STDOUT 2>%[2]s | tee /tmp/fp-up.fifo | sha256sum >/tmp/fp-up.sum; wait' >/dev/null 2>&1 & %[3]s`,
		port, log, waitListening(log))
	out, err := env.GuestExec(ctx, nsKey(receiver), "", recv)
	Expect(err).NotTo(HaveOccurred(), "start the receiver in %s: %s", receiver, out)
	s := &vsockStream{receiver: receiver, sender: sender, started: time.Now(), done: make(chan vsockStreamResult, 1)}
	line := strings.TrimSuffix(upgradeVsockLine, "\n")
	// The sender runs detached in the guest (an ssh session of the suite
	// lasts at most 2 minutes, the stream longer) and writes socat's exit
	// status and its length in seconds, by the guest's clock, when socat
	// ends: in the pipeline's last part, as the pacing loop before it only
	// ends after its last chunk, socat or not.
	send := fmt.Sprintf(`rm -f /tmp/fp-up.rc; nohup sh -c 't0=$(date +%%s); i=0; while [ $i -lt %d ]; do yes %s | head -c %d; sleep 1; i=$((i+1)); done | { socat -u STDIN VSOCK-CONNECT:%d:%d 2>/tmp/fp-up.send; echo "$? $(( $(date +%%s) - t0 ))" >/tmp/fp-up.rc; }' >/dev/null 2>&1 &`,
		upgradeVsockChunks, line, upgradeVsockChunk, cid, port)
	out, err = env.GuestExec(ctx, nsKey(sender), "", send)
	Expect(err).NotTo(HaveOccurred(), "start the sender in %s: %s", sender, out)
	go func() {
		defer GinkgoRecover()
		deadline := time.Now().Add(time.Duration(upgradeVsockChunks)*time.Second + 5*time.Minute)
		for {
			out, err := env.GuestExec(ctx, nsKey(sender), "", "cat /tmp/fp-up.rc 2>/dev/null; cat /tmp/fp-up.send")
			var code, secs int
			if err == nil {
				if _, serr := fmt.Sscan(out, &code, &secs); serr == nil {
					r := vsockStreamResult{out: out, ended: s.started.Add(time.Duration(secs) * time.Second)}
					if code != 0 {
						r.err = fmt.Errorf("the sender exited %d", code)
					}
					s.done <- r
					return
				}
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				s.done <- vsockStreamResult{out: out, err: fmt.Errorf("the sender in %s did not end: %v", sender, err), ended: time.Now()}
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return s
}

// waitListening is shell that waits until socat's log says it listens.
func waitListening(log string) string {
	return fmt.Sprintf(`i=0; while ! grep -q "listening on" %[1]s 2>/dev/null; do i=$((i + 1)); if [ $i -ge 200 ]; then echo "socat did not listen within 20s:"; cat %[1]s; exit 1; fi; sleep 0.1; done`, log)
}

// finish waits for the sender and then for the receiver's sum, and checks
// every byte arrived in order (count and sha256); it returns the report line.
func (s *vsockStream) finish(ctx SpecContext, upgradeStart, upgradeEnd time.Time) string {
	GinkgoHelper()
	var r vsockStreamResult
	Eventually(ctx, s.done).WithTimeout(time.Duration(upgradeVsockChunks)*time.Second + 5*time.Minute).Should(Receive(&r))
	Expect(r.err).NotTo(HaveOccurred(), "the sibling vsock sender in %s across the upgrade: %s", s.sender, r.out)
	Expect(s.started).To(BeTemporally("<", upgradeStart), "the stream started before the upgrade")
	Expect(r.ended).To(BeTemporally(">", upgradeEnd), "the stream ran past the upgrade (raise upgradeVsockChunks if the upgrade took longer)")
	var sum, count string
	eventually(ctx, func(g Gomega) {
		out, err := env.GuestExec(ctx, nsKey(s.receiver), "", "cat /tmp/fp-up.sum; echo ---; cat /tmp/fp-up.count")
		g.Expect(err).NotTo(HaveOccurred(), out)
		sum, count, _ = strings.Cut(out, "---")
		g.Expect(strings.Fields(sum)).NotTo(BeEmpty(), "the receiver in %s has not finished", s.receiver)
		g.Expect(strings.Fields(count)).NotTo(BeEmpty(), "the receiver in %s has not counted", s.receiver)
	}, time.Minute).Should(Succeed())
	got, err := strconv.ParseInt(strings.Fields(count)[0], 10, 64)
	Expect(err).NotTo(HaveOccurred(), "the byte count in %s: %q", s.receiver, count)
	want := int64(upgradeVsockChunks) * upgradeVsockChunk
	Expect(got).To(Equal(want), "bytes received in %s", s.receiver)
	Expect(strings.Fields(sum)[0]).To(Equal(upgradeVsockSum()), "sha256 of the bytes received in %s", s.receiver)
	took := r.ended.Sub(s.started)
	return fmt.Sprintf("%d MiB over %s (%.2f MiB/s, paced at 1 MiB/s), sha256 equal, %s–%s after its start the upgrade ran",
		want>>20, took.Round(time.Second), float64(want>>20)/took.Seconds(),
		upgradeStart.Sub(s.started).Round(time.Second), upgradeEnd.Sub(s.started).Round(time.Second))
}

// backendReplacedUnderStream deletes the vsock backend pod on the node of
// the VMs names (attachment att, vsock mode Sibling) while a sibling stream
// runs between them, as the backend upgrade of docs/operations.md does to
// VMs left running. The guests' stream must end with an error (the reset
// vhost-device-vsock sends every connection when it stops), not hang; the
// new backend pod must serve the group; and each VM must get the agent's
// SiblingBackendReplaced Warning, as QEMU does not reconnect. It returns
// the report line.
func backendReplacedUnderStream(ctx SpecContext, c client.Client, att *fastpathv1alpha1.FastPathAttachment, names []string) string {
	GinkgoHelper()
	a := &fastpathv1alpha1.FastPathAttachment{}
	Expect(c.Get(ctx, nsKey(att.Name), a)).To(Succeed())
	Expect(a.Status.VSOCKServices).To(HaveLen(1))
	cid, port := vsockAddress(a.Status.VSOCKServices[0].Address)
	server := &kubevirtv1.VirtualMachineInstance{}
	Expect(c.Get(ctx, nsKey(names[0]), server)).To(Succeed())
	key := ns + "/" + att.Name
	before := siblingBackendState(ctx, c, server.Status.NodeName, key)
	By(fmt.Sprintf("starting a sibling vsock stream from %s to %d:%d (backend pod %s, vhost-device-vsock pid %d)", names[1], cid, port, before.pod, before.pid))
	stream := startVsockStream(ctx, names[0], names[1], cid, port)
	eventually(ctx, func(g Gomega) {
		out, err := env.GuestExec(ctx, nsKey(names[0]), "", "cat /tmp/fastpath-e2e-upgrade-vsock.log")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("accepting connection"), "the receiver in %s has no connection yet", names[0])
	}, time.Minute).Should(Succeed())
	// The sender still runs now, just before the delete: a failure seen
	// after it is the delete's (the guests' clocks, to the second, cannot
	// tell).
	out, err := env.GuestExec(ctx, nsKey(names[1]), "", "cat /tmp/fp-up.rc 2>/dev/null || echo running")
	Expect(err).NotTo(HaveOccurred(), out)
	Expect(strings.TrimSpace(out)).To(Equal("running"), "the sender in %s ended before the backend pod was deleted: %s", names[1], out)

	By("deleting the backend pod " + before.pod + " under the stream")
	deleted := time.Now()
	Expect(c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: before.pod}})).To(Succeed())
	var r vsockStreamResult
	Eventually(ctx, stream.done).WithTimeout(2*time.Minute).Should(Receive(&r),
		"the sender in %s neither ended nor failed: its vsock connection hangs instead of being reset", names[1])
	Expect(r.err).To(HaveOccurred(), "the sender in %s ended without an error, as if its backend had not stopped: %s", names[1], r.out)
	ended := time.Since(deleted)

	after := siblingBackendState(ctx, c, before.node, key)
	Expect(after.podUID).NotTo(Equal(before.podUID), "a new backend pod on %s", before.node)
	var warned []string
	eventually(ctx, func(g Gomega) {
		l := &corev1.EventList{}
		g.Expect(c.List(ctx, l, client.InNamespace(ns))).To(Succeed())
		warned = nil
		for _, e := range l.Items {
			if e.Reason == "SiblingBackendReplaced" && e.InvolvedObject.Kind == "VirtualMachineInstance" && e.Type == corev1.EventTypeWarning {
				warned = append(warned, e.InvolvedObject.Name)
			}
		}
		g.Expect(warned).To(ContainElements(names), "SiblingBackendReplaced on each VMI")
	}, 2*time.Minute).Should(Succeed())
	return fmt.Sprintf("backend pod %s deleted under a sibling stream %s→%s: the sender failed (%s) within %s (polled every 5 s); new pod %s, vhost-device-vsock pid %d; SiblingBackendReplaced on VMIs %s",
		before.pod, names[1], names[0], strings.TrimSpace(r.out), ended.Round(100*time.Millisecond), after.pod, after.pid, strings.Join(warned, ", "))
}
