package soak

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Summary is the outcome of one soak part.
type Summary struct {
	// Part names the part, e.g. "plugin/OVS" or "operator".
	Part string
	// Cycles is the number of complete cycles (one attachment's ADD, CHECK
	// and DEL; one wiring and unwiring of every VM).
	Cycles int
	// Faults is the number of faults injected: kills that landed while the
	// process ran, namespaces removed, repeated or conflicting requests.
	Faults int
	// Survived is the number of faults whose recovery succeeded.
	Survived int
	// Lost is the number of failed recoveries and of objects that reported
	// success and then failed a check.
	Lost int
	// Transient is the number of requests that failed and succeeded when
	// retried the way a runtime or controller retries (not a loss).
	Transient int
	// Leaked is the number of objects left behind after a batch.
	Leaked int
	// Duration is the wall-clock time of the part.
	Duration time.Duration
	// Problems describes each loss and leak (at most maxProblems).
	Problems []string
	// Notes are figures that explain the counts (e.g. kills sent after the
	// process had exited, which are not counted as faults).
	Notes []string
}

// maxProblems bounds Summary.Problems.
const maxProblems = 50

// OK reports whether nothing was lost or leaked.
func (s Summary) OK() bool { return s.Lost == 0 && s.Leaked == 0 }

// String is the summary line.
func (s Summary) String() string {
	line := fmt.Sprintf("soak %s: cycles=%d faults=%d survived=%d lost=%d leaked=%d transient=%d duration=%s",
		s.Part, s.Cycles, s.Faults, s.Survived, s.Lost, s.Leaked, s.Transient, s.Duration.Round(100*time.Millisecond))
	if len(s.Notes) > 0 {
		line += " (" + strings.Join(s.Notes, "; ") + ")"
	}
	return line
}

// tally is a Summary under construction, safe for concurrent use.
type tally struct {
	mu   sync.Mutex
	s    Summary
	logf func(format string, args ...any) // may be nil
}

func (t *tally) cycle() { t.mu.Lock(); t.s.Cycles++; t.mu.Unlock() }

// fault counts one injected fault and whether its recovery succeeded; a
// failed one is also a loss, described by why.
func (t *tally) fault(survived bool, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s.Faults++
	if survived {
		t.s.Survived++
		return
	}
	t.s.Lost++
	t.problem("lost: " + why)
}

// lost counts a loss that is not the recovery of a fault.
func (t *tally) lost(why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s.Lost++
	t.problem("lost: " + why)
}

// leaked counts n leaked objects described by what.
func (t *tally) leaked(n int, what string) {
	if n == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s.Leaked += n
	t.problem(fmt.Sprintf("leaked %d: %s", n, what))
}

// transient counts a request that succeeded only when retried.
func (t *tally) transient(why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s.Transient++
	t.problem("transient: " + why)
}

func (t *tally) problem(p string) {
	if t.logf != nil {
		t.logf("%s: %s", t.s.Part, p)
	}
	if len(t.s.Problems) < maxProblems {
		t.s.Problems = append(t.s.Problems, p)
	}
}

func (t *tally) summary() Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.Problems = append([]string(nil), t.s.Problems...)
	s.Notes = append([]string(nil), t.s.Notes...)
	return s
}
