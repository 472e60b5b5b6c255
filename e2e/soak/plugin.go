package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
)

// PluginOptions configures the plugin part.
type PluginOptions struct {
	// Plugin is the path of the fastpath binary.
	Plugin string
	// CNIPath holds host-local; default "/usr/lib/cni" (Debian's plugins).
	CNIPath string
	// Datapath is "LinuxBridge" or "OVS" (OVS must run, e.g. ovsrun.Start).
	Datapath string
	// Cycles is the least number of attachment cycles, rounded up to whole
	// batches.
	Cycles int
	// Batch is the number of attachments added, checked and deleted in
	// parallel in one batch; default 20.
	Batch int
	// Seed seeds the choice of faults and kill delays.
	Seed uint64
	// Deadline, when not zero, stops the part before a batch that would
	// start after it (the summary says how many cycles ran).
	Deadline time.Time
	// WorkDir holds the state and host-local directories.
	WorkDir string
	// Logf, when set, receives a line per batch.
	Logf func(format string, args ...any)
}

// attachment is one cycle's attachment.
type attachment struct {
	add    request
	netns  ns.NetNS
	result []byte // the ADD result; nil when no ADD reported success
	nsGone bool
	hostIf string
	rng    *rand.Rand
	// history lists the steps taken, for problem reports.
	history []string
}

// desc names a and the steps taken on it.
func desc(a *attachment) string {
	return short(a) + " [" + strings.Join(a.history, ", ") + "]"
}

// pluginRun is the state of one plugin part.
type pluginRun struct {
	n        *node
	t        *tally
	mu       sync.Mutex
	addTime  time.Duration // moving average of unkilled ADDs
	delTime  time.Duration
	lateKill int // kills that arrived after the process exited
	reported map[string]bool
}

// RunPlugin runs the plugin part on one datapath: batches of opts.Batch
// attachments, each added (plainly, killed at a random point and retried,
// killed and given up with a DEL, killed twice, repeated, or followed by a
// conflicting ADD) and checked in parallel; then every attachment of the
// batch is checked again and deleted in parallel (plainly, killed at a
// random point and deleted again, after its netns was removed, or twice).
// After each batch it counts leaked host veths, bridge ports, host-local
// allocations and state or temporary files, then runs GC (which must
// succeed) and counts what GC left. The error is for a part that could not
// run (bridge or netns creation).
func RunPlugin(ctx context.Context, opts PluginOptions) (Summary, error) {
	if opts.CNIPath == "" {
		opts.CNIPath = "/usr/lib/cni"
	}
	if opts.Batch <= 0 {
		opts.Batch = 20
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	start := time.Now()
	n, err := newNode(opts.Plugin, opts.CNIPath, opts.Datapath, opts.WorkDir)
	if err != nil {
		return Summary{}, err
	}
	defer n.close()
	r := &pluginRun{n: n, t: &tally{s: Summary{Part: "plugin/" + opts.Datapath}, logf: opts.Logf}, addTime: 50 * time.Millisecond,
		delTime: 30 * time.Millisecond, reported: map[string]bool{}}
	rng := rand.New(rand.NewPCG(opts.Seed, 18))
	batches := 0
	for r.t.summary().Cycles < opts.Cycles {
		if ctx.Err() != nil || (!opts.Deadline.IsZero() && time.Now().After(opts.Deadline)) {
			r.t.mu.Lock()
			r.t.s.Notes = append(r.t.s.Notes, fmt.Sprintf("stopped by the deadline after %d batches", batches))
			r.t.mu.Unlock()
			break
		}
		if err := r.batch(ctx, opts.Batch, rng); err != nil {
			return r.t.summary(), err
		}
		batches++
		s := r.t.summary()
		opts.Logf("%s batch %d: cycles=%d faults=%d survived=%d lost=%d leaked=%d", s.Part, batches, s.Cycles, s.Faults, s.Survived, s.Lost, s.Leaked)
	}
	s := r.t.summary()
	s.Duration = time.Since(start)
	s.Notes = append(s.Notes, fmt.Sprintf("%d parallel per batch", opts.Batch),
		fmt.Sprintf("%d kills arrived after exit, not counted", r.lateKill),
		fmt.Sprintf("ADD %s, DEL %s on average", r.addTime.Round(time.Millisecond), r.delTime.Round(time.Millisecond)))
	return s, nil
}

func (r *pluginRun) batch(ctx context.Context, size int, rng *rand.Rand) error {
	atts := make([]*attachment, size)
	for i := range atts {
		netns, err := testutils.NewNS()
		if err != nil {
			for _, a := range atts[:i] {
				removeNS(a.netns)
			}
			return fmt.Errorf("failed to create netns: %w", err)
		}
		cid := r.n.containerID()
		atts[i] = &attachment{netns: netns, hostIf: plugin.HostIfName(cid, "net1"),
			add: request{command: "ADD", containerID: cid, netns: netns.Path(), ifName: "net1", conf: r.n.conf},
			rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))}
	}
	defer func() {
		for _, a := range atts {
			removeNS(a.netns)
		}
	}()

	// A batch runs to its end once started: an interrupt of the soak stops
	// it between batches, not in the middle of a runtime's recovery.
	ctx = context.WithoutCancel(ctx)
	parallel(atts, func(a *attachment) { r.addPhase(ctx, a) })
	// Every attachment that reported success still passes CHECK after the
	// whole batch was added around it.
	parallel(atts, func(a *attachment) {
		if a.result != nil {
			if err := r.check(ctx, a); err != nil {
				r.t.lost(fmt.Sprintf("attachment %s failed CHECK after its batch was added: %v", desc(a), err))
			}
		}
	})
	parallel(atts, func(a *attachment) { r.delPhase(ctx, a) })
	for range atts {
		r.t.cycle()
	}

	hostIfs := make([]string, len(atts))
	for i, a := range atts {
		hostIfs[i] = a.hostIf
		if !a.nsGone {
			if links := nsLinks(a.netns); len(links) != 1 {
				r.t.leaked(len(links)-1, fmt.Sprintf("container interfaces in %s: %v", a.netns.Path(), links))
			}
		}
	}
	if err := r.countLeaks(hostIfs, "after DEL"); err != nil {
		return err
	}
	if _, err := r.n.exec(ctx, request{command: "GC", conf: r.n.gcConf()}); err != nil {
		r.t.lost(fmt.Sprintf("GC failed: %v", err))
	}
	return r.countLeaks(hostIfs, "after GC")
}

// countLeaks counts what is left, each object once over the whole part.
func (r *pluginRun) countLeaks(hostIfs []string, when string) error {
	leaks, err := r.n.leaks(hostIfs)
	if err != nil {
		return err
	}
	kinds := make([]string, 0, len(leaks))
	for k := range leaks {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		var fresh []string
		for _, name := range leaks[kind] {
			if !r.reported[kind+"/"+name] {
				r.reported[kind+"/"+name] = true
				fresh = append(fresh, name)
			}
		}
		r.t.leaked(len(fresh), fmt.Sprintf("%s %s: %s", kind, when, strings.Join(fresh, ", ")))
	}
	return nil
}

// addPhase adds a with one of the ADD faults (or none) and checks it.
func (r *pluginRun) addPhase(ctx context.Context, a *attachment) {
	switch p := a.rng.IntN(100); {
	case p < 35: // plain
		r.timedAdd(ctx, a)
	case p < 55: // killed, retried by the runtime
		landed := r.kill(a, a.add, r.killDelay(a, false))
		r.timedAdd(ctx, a)
		r.recovered(landed, a, "retried ADD after a kill")
	case p < 65: // killed, then the runtime gives up and deletes
		if r.kill(a, a.add, r.killDelay(a, false)) {
			del := a.add
			del.command = "DEL"
			_, err := r.run(ctx, a, del)
			r.t.fault(err == nil, fmt.Sprintf("DEL after a killed ADD of %s: %v", desc(a), err))
			return
		}
		r.timedAdd(ctx, a) // the ADD had finished: the retry gets its result
	case p < 75: // killed twice, then retried
		l1 := r.kill(a, a.add, r.killDelay(a, false))
		l2 := r.kill(a, a.add, r.killDelay(a, false))
		r.timedAdd(ctx, a)
		r.recovered(l1, a, "retried ADD after two kills")
		r.recovered(l2, a, "retried ADD after two kills")
	case p < 88: // the same ADD twice
		r.timedAdd(ctx, a)
		if a.result == nil {
			return
		}
		out, err := r.run(ctx, a, a.add)
		same := err == nil && sameJSON(out, a.result)
		r.t.fault(same && r.check(ctx, a) == nil, fmt.Sprintf("repeated ADD of %s: same result %v, error %v", desc(a), same, err))
		return
	default: // a conflicting ADD (another netns) must be refused
		r.timedAdd(ctx, a)
		if a.result == nil {
			return
		}
		other := a.add
		other.netns = "/var/run/netns/fastpath-soak-none"
		_, err := r.run(ctx, a, other)
		cerr := r.check(ctx, a)
		r.t.fault(err != nil && cerr == nil, fmt.Sprintf("conflicting ADD of %s: refused %v, first attachment CHECK %v", desc(a), err != nil, cerr))
		return
	}
	if a.result != nil {
		if err := r.check(ctx, a); err != nil {
			r.t.lost(fmt.Sprintf("attachment %s reported success and failed CHECK: %v", desc(a), err))
		}
	}
}

// recovered counts a landed kill as survived when the retried ADD
// succeeded and passes CHECK.
func (r *pluginRun) recovered(landed bool, a *attachment, what string) {
	if !landed {
		return
	}
	var err error
	if a.result == nil {
		err = fmt.Errorf("the retried ADD failed")
	} else {
		err = r.check(context.Background(), a)
	}
	r.t.fault(err == nil, fmt.Sprintf("%s %s: %v", what, desc(a), err))
}

// delPhase deletes a with one of the DEL faults (or none).
func (r *pluginRun) delPhase(ctx context.Context, a *attachment) {
	del := a.add
	del.command = "DEL"
	switch p := a.rng.IntN(100); {
	case p < 45:
		if err := r.timedDel(ctx, a, del); err != nil {
			r.t.lost(fmt.Sprintf("DEL of %s: %v", desc(a), err))
		}
	case p < 70: // killed, then deleted again
		landed := r.kill(a, del, r.killDelay(a, true))
		err := r.timedDel(ctx, a, del)
		if landed {
			r.t.fault(err == nil, fmt.Sprintf("DEL after a killed DEL of %s: %v", desc(a), err))
		} else if err != nil {
			r.t.lost(fmt.Sprintf("DEL of %s: %v", desc(a), err))
		}
	case p < 85: // the netns is removed before DEL (pod sandbox gone)
		removeNS(a.netns)
		a.nsGone = true
		err := r.timedDel(ctx, a, del)
		r.t.fault(err == nil, fmt.Sprintf("DEL of %s after its netns was removed: %v", desc(a), err))
	default: // DEL twice
		err1 := r.timedDel(ctx, a, del)
		_, err2 := r.run(ctx, a, del)
		r.t.fault(err1 == nil && err2 == nil, fmt.Sprintf("DEL twice of %s: %v, %v", desc(a), err1, err2))
	}
}

// addRetries is how often timedAdd retries a failed ADD, as kubelet retries
// a pod sandbox whose network setup failed.
const addRetries = 2

// timedAdd runs ADD as a runtime does: a failed ADD is followed by DEL and
// retried after a second, up to addRetries times. An ADD that succeeds on a
// retry is a transient failure (listed in the summary's problems, not a
// loss, since nothing was left half-done: the DEL succeeded and the leak
// checks still run); one that never succeeds is a loss.
func (r *pluginRun) timedAdd(ctx context.Context, a *attachment) {
	var failures []string
	for try := 0; try <= addRetries; try++ {
		start := time.Now()
		out, err := r.run(ctx, a, a.add)
		if err == nil {
			r.record(&r.addTime, time.Since(start))
			a.result = out
			if len(failures) > 0 {
				r.t.transient(fmt.Sprintf("ADD of %s failed %d times before it succeeded: %s", desc(a), len(failures), strings.Join(failures, "; ")))
			}
			return
		}
		failures = append(failures, err.Error())
		del := a.add
		del.command = "DEL"
		if _, err := r.run(ctx, a, del); err != nil {
			r.t.lost(fmt.Sprintf("DEL after a failed ADD of %s: %v", desc(a), err))
			return
		}
		time.Sleep(time.Second)
	}
	r.t.lost(fmt.Sprintf("ADD of %s failed %d times: %s", desc(a), len(failures), strings.Join(failures, "; ")))
}

func (r *pluginRun) timedDel(ctx context.Context, a *attachment, del request) error {
	start := time.Now()
	_, err := r.run(ctx, a, del)
	if err == nil {
		r.record(&r.delTime, time.Since(start))
	}
	return err
}

// run executes req for a and records the step in a's history.
func (r *pluginRun) run(ctx context.Context, a *attachment, req request) ([]byte, error) {
	start := time.Now()
	out, err := r.n.exec(ctx, req)
	step := fmt.Sprintf("%s %s", req.command, time.Since(start).Round(time.Millisecond))
	if req.netns != a.add.netns && req.command == "ADD" {
		step = "conflicting " + step
	}
	if err != nil {
		step += " failed"
	}
	a.history = append(a.history, step)
	return out, err
}

func (r *pluginRun) record(avg *time.Duration, d time.Duration) {
	r.mu.Lock()
	*avg = (*avg*7 + d) / 8
	r.mu.Unlock()
}

func (r *pluginRun) avg(d *time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *d
}

// killDelay is a random point in 0-130% of the average ADD (or DEL) time.
func (r *pluginRun) killDelay(a *attachment, del bool) time.Duration {
	d := r.avg(&r.addTime)
	if del {
		d = r.avg(&r.delTime)
	}
	return time.Duration(a.rng.Int64N(int64(d)*13/10 + 1))
}

// kill runs req and kills it after delay; it reports whether the kill
// landed and counts the ones that did not.
func (r *pluginRun) kill(a *attachment, req request, delay time.Duration) bool {
	landed, err := r.n.killed(req, delay)
	a.history = append(a.history, fmt.Sprintf("%s killed at %s (landed %v)", req.command, delay.Round(time.Millisecond), landed))
	if err != nil {
		r.t.lost(err.Error())
		return false
	}
	if !landed {
		r.mu.Lock()
		r.lateKill++
		r.mu.Unlock()
	}
	return landed
}

func (r *pluginRun) check(ctx context.Context, a *attachment) error {
	conf, err := r.n.checkConf(a.result)
	if err != nil {
		return err
	}
	check := a.add
	check.command, check.conf = "CHECK", conf
	_, err = r.run(ctx, a, check)
	return err
}

func parallel(atts []*attachment, f func(*attachment)) {
	var wg sync.WaitGroup
	for _, a := range atts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(a)
		}()
	}
	wg.Wait()
}

func removeNS(netns ns.NetNS) {
	if netns == nil {
		return
	}
	_ = netns.Close()
	_ = testutils.UnmountNS(netns)
}

// nsLinks lists the links in netns; nil when it cannot be entered.
func nsLinks(netns ns.NetNS) []string {
	var names []string
	_ = netns.Do(func(ns.NetNS) error {
		links, err := netlink.LinkList()
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		return err
	})
	if names == nil {
		return []string{"lo"}
	}
	return names
}

func short(a *attachment) string { return a.add.containerID[:12] + "/" + a.add.ifName }

func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
