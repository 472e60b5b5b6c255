package ovsrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/ovsrun"
	"github.com/fastpath-io/fastpath/internal/testutil"
)

// Start brings OVS up with userspace TSO (or finds it running), holds the
// lock against a second holder until Stop, and Stop leaves OVS as Start
// found it.
func TestStartLockStop(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	ctx := context.Background()
	log := testr.New(t)
	ranBefore := ovsrun.Answers() && ovsrun.VswitchdRuns()

	s, err := ovsrun.Start(ctx, log)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = s.Stop() })
	g.Expect(s.Started()).To(gomega.Equal(!ranBefore))
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

	g.Expect(s.Stop()).To(gomega.Succeed())
	g.Expect(s.Stop()).To(gomega.Succeed(), "Stop is idempotent")
	g.Expect(ovsrun.VswitchdRuns()).To(gomega.Equal(ranBefore), "Stop stops only what Start started")

	// The lock is free again.
	s2, err := ovsrun.Start(ctx, log)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s2.Stop()).To(gomega.Succeed())
}
