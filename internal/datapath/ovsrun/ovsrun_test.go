package ovsrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/datapath/ovsrun"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// Start brings OVS up with userspace TSO (or finds it running), holds the
// lock against a second holder until Stop, and Stop leaves OVS as Start
// found it.
func TestStartLockStop(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	ctx := context.Background()
	log := testr.New(t)

	// Whether OVS ran before can only be known under the lock: other test
	// packages (go test runs them in parallel) start and stop OVS while they
	// hold it. So the assertions below hold whatever the other holders did.
	s, err := ovsrun.Start(ctx, log)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = s.Stop() })
	g.Expect(ovsrun.Answers()).To(gomega.BeTrue())
	g.Expect(ovsrun.VswitchdRuns()).To(gomega.BeTrue())
	out, err := ovsrun.Vsctl("get", "Open_vSwitch", ".", "other_config:userspace-tso-enable")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out)
	g.Expect(s.UserspaceTSO()).To(gomega.Equal(out == "\"true\"\n"), "UserspaceTSO must match the database (%q)", out)
	if s.Started() {
		g.Expect(s.UserspaceTSO()).To(gomega.BeTrue(), "an OVS Start started has userspace TSO")
	}

	// flock(2) locks belong to the open file, so a second Start of this
	// process waits like another process would, until its context ends.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = ovsrun.Start(short, log)
	g.Expect(err).To(gomega.MatchError(context.DeadlineExceeded))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("failed to lock " + ovsrun.LockPath)))

	started := s.Started()
	g.Expect(s.Stop()).To(gomega.Succeed())
	g.Expect(s.Stop()).To(gomega.Succeed(), "Stop is idempotent")
	if !started {
		// An OVS this Session did not start is still running: no holder of the
		// lock stops what it did not start. (When this Session started OVS, a
		// holder waiting for the lock may start it again at once, so its
		// absence cannot be asserted here.)
		g.Expect(ovsrun.VswitchdRuns()).To(gomega.BeTrue(), "Stop stops only what Start started")
	}

	// The lock is free again.
	s2, err := ovsrun.Start(ctx, log)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s2.Stop()).To(gomega.Succeed())
}
