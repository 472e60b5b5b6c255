package soak

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

// The streams phase of the agent part (AgentOptions.StreamKills): a TCP
// connection over the fast path and relayed vsock connections while the
// agent is SIGKILLed and restarted.
const (
	// streamFrame is the payload of one frame of the TCP stream, in bytes.
	streamFrame = 16 << 10
	// streamRate bounds each direction of the TCP stream, in bytes per
	// second: enough to see any stall of a few milliseconds, little enough
	// to leave the machine's cores to the agent's restarts.
	streamRate = 8 << 20
	// streamPort is the TCP port the first namespace listens on.
	streamPort = 5201
	// stallLimit is how long the TCP stream may carry nothing in a
	// direction when checked after a restart before it counts as lost.
	stallLimit = time.Second
	// adoptWait is how long after a restarted agent serves the relay again
	// the datapath is compared with what it was: its first reconcile of the
	// node's bridges has run by then.
	adoptWait = 200 * time.Millisecond
)

// frameHeader is the sequence number (8 bytes, big endian) before a
// frame's payload; the frame ends with the CRC-32 (IEEE) of header and
// payload.
const frameHeader = 8

// fillFrame writes frame seq of direction dir into b (frameHeader +
// streamFrame + 4 bytes): the sequence number, a payload derived from both
// (so that a frame of the other direction or another position differs),
// and the checksum.
func fillFrame(b []byte, dir byte, seq uint64) {
	binary.BigEndian.PutUint64(b, seq)
	x := uint32(seq)*2654435761 + uint32(dir)
	for i := frameHeader; i < frameHeader+streamFrame; i += 4 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		binary.LittleEndian.PutUint32(b[i:], x)
	}
	binary.BigEndian.PutUint32(b[frameHeader+streamFrame:], crc32.ChecksumIEEE(b[:frameHeader+streamFrame]))
}

// streamStats are the figures of one direction of the TCP stream.
type streamStats struct {
	frames   atomic.Int64 // frames received in order and intact
	maxGapNs atomic.Int64 // longest time between two received frames
	lastNs   atomic.Int64 // unix ns of the last frame received
	mu       sync.Mutex
	err      error // the first thing that broke the direction
}

// fail records err unless something broke the direction before.
func (st *streamStats) fail(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err == nil {
		st.err = err
	}
}

func (st *streamStats) broken() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// sendFrames writes frames 0, 1, ... of direction dir to c at streamRate
// until stop is closed or a write fails; sent, when not nil, counts the
// frames written whole.
func sendFrames(c net.Conn, dir byte, stop <-chan struct{}, sent *atomic.Int64) error {
	b := make([]byte, frameHeader+streamFrame+4)
	start := time.Now()
	for seq := uint64(0); ; seq++ {
		select {
		case <-stop:
			return nil
		default:
		}
		fillFrame(b, dir, seq)
		if _, err := c.Write(b); err != nil {
			return err
		}
		if sent != nil {
			sent.Add(1)
		}
		// Pace: frame seq+1 is due at start + (seq+1)*len/streamRate.
		due := start.Add(time.Duration(float64(seq+1) * float64(len(b)) / streamRate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
	}
}

// readFrames reads frames of direction dir from c, checking sequence and
// checksum against what sendFrames writes, until a read fails.
func readFrames(c net.Conn, dir byte, st *streamStats) {
	got := make([]byte, frameHeader+streamFrame+4)
	want := make([]byte, len(got))
	last := time.Now()
	for seq := uint64(0); ; seq++ {
		if _, err := io.ReadFull(c, got); err != nil {
			st.fail(fmt.Errorf("read after %d frames: %w", seq, err))
			return
		}
		now := time.Now()
		if gap := now.Sub(last).Nanoseconds(); gap > st.maxGapNs.Load() {
			st.maxGapNs.Store(gap)
		}
		last = now
		st.lastNs.Store(now.UnixNano())
		fillFrame(want, dir, seq)
		if string(got) != string(want) {
			st.fail(fmt.Errorf("frame %d lost, reordered or corrupt: got sequence %d, checksum ok %t", seq, binary.BigEndian.Uint64(got),
				crc32.ChecksumIEEE(got[:frameHeader+streamFrame]) == binary.BigEndian.Uint32(got[frameHeader+streamFrame:])))
			return
		}
		st.frames.Add(1)
	}
}

// tcpStream is one TCP connection between two network namespaces, a
// stream each way.
type tcpStream struct {
	a, b   net.Conn
	stop   chan struct{}
	wg     sync.WaitGroup
	ab, ba streamStats
}

// startTCP connects from netns b to ipA:streamPort in netns a and starts a
// stream each way.
func startTCP(nsA, nsB ns.NetNS, ipA net.IP) (*tcpStream, error) {
	addr := net.JoinHostPort(ipA.String(), fmt.Sprint(streamPort))
	var ln net.Listener
	if err := nsA.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", addr, err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	s := &tcpStream{stop: make(chan struct{})}
	if err := nsB.Do(func(ns.NetNS) error {
		var err error
		s.b, err = net.DialTimeout("tcp", addr, 10*time.Second)
		return err
	}); err != nil {
		return nil, fmt.Errorf("failed to connect to %s over the fast path: %w", addr, err)
	}
	select {
	case s.a = <-accepted:
	case <-time.After(10 * time.Second):
	}
	if s.a == nil {
		s.b.Close()
		return nil, fmt.Errorf("failed to accept on %s", addr)
	}
	for _, p := range []struct {
		w, r net.Conn
		dir  byte
		st   *streamStats
	}{{s.a, s.b, 'a', &s.ab}, {s.b, s.a, 'b', &s.ba}} {
		s.wg.Add(2)
		go func() {
			defer s.wg.Done()
			if err := sendFrames(p.w, p.dir, s.stop, nil); err != nil {
				p.st.fail(fmt.Errorf("write: %w", err))
			}
			_ = p.w.(*net.TCPConn).CloseWrite() // a FIN after the last frame: the reader's EOF
		}()
		go func() { defer s.wg.Done(); readFrames(p.r, p.dir, p.st) }()
	}
	return s, nil
}

// broken returns what broke the connection, or nil while both directions
// flow.
func (s *tcpStream) broken() error {
	for _, st := range []*streamStats{&s.ab, &s.ba} {
		if err := st.broken(); err != nil {
			return err
		}
	}
	return nil
}

// flowing waits up to within until both directions have received a frame
// after now, and fails saying for how long one has not. A stalled
// connection is lost as surely as a reset one.
func (s *tcpStream) flowing(within time.Duration) error {
	return flowing(within, &s.ab, &s.ba)
}

// flowing waits up to within until every direction of sts has received a
// frame after now (see tcpStream.flowing).
func flowing(within time.Duration, sts ...*streamStats) error {
	now := time.Now()
	deadline := now.Add(within)
	for {
		stalled := ""
		for _, st := range sts {
			if last := time.Unix(0, st.lastNs.Load()); last.Before(now) {
				stalled = fmt.Sprintf("no frame for %s", time.Since(last).Round(time.Millisecond))
				if gap := time.Since(last).Nanoseconds(); gap > st.maxGapNs.Load() {
					st.maxGapNs.Store(gap)
				}
			}
		}
		if stalled == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stalled: %s", stalled)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// close stops both writers and waits for the goroutines: each writer ends
// its direction with a FIN after its last frame, so each reader counts
// every frame in flight and stops at EOF. A connection that no longer
// carries (lost, or a reader that gave up and left its writer blocked) is
// given up after drainWithin by the deadline. Then it closes the connection.
func (s *tcpStream) close() {
	const drainWithin = 10 * time.Second
	close(s.stop)
	for _, c := range []net.Conn{s.a, s.b} {
		_ = c.SetDeadline(time.Now().Add(drainWithin))
	}
	s.wg.Wait()
	s.a.Close()
	s.b.Close()
}

// streamsRun is the state of the streams phase.
type streamsRun struct {
	*agentRun
	t      *tally
	bridge string
	nsA    ns.NetNS
	nsB    ns.NetNS
	n      *node
	adds   []request
	// portNames are the bridge's ports made by the ADDs.
	portNames []string
}

// relayStreams is the number of relayed connections the streams phase
// keeps open through every kill.
const relayStreams = 2

// runStreams is the streams phase: it wires two network namespaces to a
// bridge the agent made through the CNI plugin's ADD (port security on),
// keeps a TCP connection between them streaming both ways and relayStreams
// relayed connections (EMULATED vsock, through the relay in the vsock
// backend process) streaming to the echo server, and SIGKILLs and restarts
// the agent o.StreamKills times. While the agent is down the relayed
// connections still flow. After each restart: the TCP connection and the
// relayed connections still flow, intact and in order (none ended: a reset
// is a loss now that the relay outlives the agent); the datapath is as it
// was (datapath); a new relayed connection is served. The datapath is
// compared again just before the next kill, when the restarted agent has
// run for a while. At the end each relayed connection is half-closed and
// must echo back exactly the frames sent, each with its sequence number and
// CRC-32.
func (r *agentRun) runStreams(ctx context.Context) (Summary, error) {
	start := time.Now()
	s := &streamsRun{agentRun: r, t: &tally{s: Summary{Part: "agent/streams"}, logf: r.t.logf}, bridge: r.prefix + "s"}
	cleaned := false
	defer func() {
		if !cleaned {
			s.cleanup(ctx)
		}
	}()
	if err := s.setup(ctx); err != nil {
		return s.t.summary(), err
	}
	ipA, err := s.add(ctx, &s.nsA)
	if err != nil {
		return s.t.summary(), err
	}
	if _, err := s.add(ctx, &s.nsB); err != nil {
		return s.t.summary(), err
	}
	before, err := readDatapath(s.bridge)
	if err != nil {
		return s.t.summary(), err
	}
	if len(before.ports) != 2 {
		return s.t.summary(), fmt.Errorf("bridge %s has ports %v after two ADDs, want 2", s.bridge, before.ports)
	}
	s.portNames = before.portNames()
	rules := strings.Count(before.chains, "# handle")
	tcp, err := startTCP(s.nsA, s.nsB, ipA)
	if err != nil {
		return s.t.summary(), err
	}
	if err := r.waitRelay(ctx); err != nil {
		return s.t.summary(), fmt.Errorf("the relay did not serve before the kills: %w", err)
	}
	var relayed []*relayStream
	defer func() {
		for _, rs := range relayed {
			rs.c.Close()
		}
	}()
	var relaySts []*streamStats
	for i := range relayStreams {
		rs, err := r.startRelayStream(ctx)
		if err != nil {
			return s.t.summary(), fmt.Errorf("failed to start relayed stream %d: %w", i+1, err)
		}
		relayed, relaySts = append(relayed, rs), append(relaySts, &rs.st)
	}
	tcpLost, relayLost := 0, 0
	var restartSum, restartMax time.Duration
	for k := 0; k < r.o.StreamKills; k++ {
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(50+r.rng.IntN(100)) * time.Millisecond)
		var why []string
		// The agent restarted last has run a while: nothing changed since.
		if now, err := readDatapath(s.bridge); err != nil {
			why = append(why, err.Error())
		} else if d := now.diff(before); d != "" {
			why = append(why, "the agent changed the datapath after its restart: "+d)
		}
		// relayCheck counts the relayed connections that ended or stalled
		// (once each: a lost connection stays lost).
		relayCheck := func(when string) {
			if relayLost > 0 {
				return
			}
			for i, rs := range relayed {
				if err := rs.broken(); err != nil {
					relayLost++
					why = append(why, fmt.Sprintf("relayed connection %d ended or broke %s: %v", i+1, when, err))
				}
			}
			if relayLost == 0 {
				if err := flowing(stallLimit, relaySts...); err != nil {
					relayLost++
					why = append(why, fmt.Sprintf("relayed connections %s: %v", when, err))
				}
			}
		}
		r.agent.kill()
		relayCheck("while the agent was down")
		time.Sleep(time.Duration(r.rng.IntN(100)) * time.Millisecond)
		restarted := time.Now()
		if err := r.agent.start(); err != nil {
			return s.t.summary(), err
		}
		if err := r.waitRelay(ctx); err != nil {
			why = append(why, fmt.Sprintf("a new relayed connection after the restart: %v", err))
		}
		restart := time.Since(restarted)
		restartSum += restart
		restartMax = max(restartMax, restart)
		time.Sleep(adoptWait)
		if now, err := readDatapath(s.bridge); err != nil {
			why = append(why, err.Error())
		} else if d := now.diff(before); d != "" {
			why = append(why, "the restarted agent changed the datapath: "+d)
		}
		relayCheck("after the agent's restart")
		if tcpLost == 0 {
			err := tcp.broken()
			if err == nil {
				err = tcp.flowing(stallLimit)
			}
			if err != nil {
				tcpLost++
				why = append(why, fmt.Sprintf("TCP connection over the fast path lost: %v", err))
			}
		}
		s.t.cycle()
		s.t.fault(len(why) == 0, fmt.Sprintf("agent kill %d during the streams: %s", k+1, strings.Join(why, "; ")))
		if (k+1)%10 == 0 {
			sum := s.t.summary()
			r.o.Log.Info(fmt.Sprintf("agent streams: %d kills, faults=%d survived=%d lost=%d, TCP %d MiB, relayed %d MiB", k+1, sum.Faults, sum.Survived, sum.Lost,
				(tcp.ab.frames.Load()+tcp.ba.frames.Load())*streamFrame>>20, relayedFrames(relayed)*streamFrame>>20))
		}
	}
	if err := tcp.broken(); err != nil && tcpLost == 0 {
		tcpLost++
		s.t.lost(fmt.Sprintf("TCP connection over the fast path lost after the kills: %v", err))
	}
	tcp.close()
	// Every relayed connection must echo back exactly what it sent.
	var relaySent, relayEchoed int64
	var relayMaxStall time.Duration
	for i, rs := range relayed {
		err := rs.finish(10 * time.Second)
		relaySent += rs.sent.Load()
		relayEchoed += rs.st.frames.Load()
		relayMaxStall = max(relayMaxStall, time.Duration(rs.st.maxGapNs.Load()))
		if err != nil {
			if relayLost == 0 {
				s.t.lost(fmt.Sprintf("relayed connection %d after the kills: %v", i+1, err))
			}
			relayLost++
		}
	}
	relayed = nil
	if !r.backend.running() {
		s.t.lost("the vsock backend exited during the streams (see backend.log)")
	}
	cleaned = true
	s.cleanup(ctx)
	sum := s.t.summary()
	sum.Duration = time.Since(start)
	bytes := (tcp.ab.frames.Load() + tcp.ba.frames.Load()) * streamFrame
	maxStall := time.Duration(max(tcp.ab.maxGapNs.Load(), tcp.ba.maxGapNs.Load()))
	avgRestart := time.Duration(0)
	if sum.Cycles > 0 {
		avgRestart = restartSum / time.Duration(sum.Cycles)
	}
	frameBytes := int64(frameHeader + streamFrame + 4)
	sum.Notes = append(sum.Notes,
		fmt.Sprintf("%d agent kills, restart to a new relayed connection served %s on average, %s at most", sum.Faults,
			avgRestart.Round(time.Millisecond), restartMax.Round(time.Millisecond)),
		fmt.Sprintf("TCP over the fast path (CNI ADD on agent bridge %s, port security on): 1 connection, %.1f MiB carried both ways intact and in order, %d connections lost, max stall %s (longest gap between frames, %d KiB frames at %d MiB/s each way)",
			s.bridge, float64(bytes)/(1<<20), tcpLost, maxStall.Round(time.Millisecond), streamFrame>>10, streamRate>>20),
		fmt.Sprintf("datapath compared with before after each restart and before the next kill: bridge ifindex, %d ports, %d port security rules and chains by handle", len(before.ports), rules),
		fmt.Sprintf("vsock EMULATED over UNIX sockets, relay in fastpath-vsock-backend (never killed): %d relayed connections open through all %d kills, %d reset or lost, %.1f MiB sent and %.1f MiB echoed back (%d of %d frames, each checked by sequence number and CRC-32: %d bytes lost or reordered), max stall %s",
			len(relaySts), sum.Faults, relayLost, float64(relaySent*frameBytes)/(1<<20), float64(relayEchoed*frameBytes)/(1<<20), relayEchoed, relaySent,
			max(relaySent-relayEchoed, 0)*frameBytes, relayMaxStall.Round(time.Millisecond)))
	return sum, nil
}

// setup asks for the bridge (a FastPathNetwork and an attachment naming it,
// as bridgeRound does) and waits until the agent made it; it writes the
// plugin's node configuration.
func (s *streamsRun) setup(ctx context.Context) error {
	fpnet := &v1alpha1.FastPathNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "br-" + s.bridge},
		Spec: v1alpha1.FastPathNetworkSpec{Datapath: v1alpha1.DatapathLinuxBridge, Bridge: s.bridge,
			MTU:               &v1alpha1.MTURange{Max: ptr.To(int32(9000))},
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: s.ns}}},
	}
	if err := s.cl.c.Create(ctx, fpnet); err != nil {
		return fmt.Errorf("failed to create FastPathNetwork %s: %w", fpnet.Name, err)
	}
	att := &v1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "br-" + s.bridge},
		Spec: v1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "none"}},
			NetworkRef: &v1alpha1.NetworkReference{Name: fpnet.Name},
			Network:    &v1alpha1.NetworkSpec{MTU: ptr.To(int32(9000)), IPAM: v1alpha1.IPAMSpec{Subnet: "10.253.0.0/24"}},
		},
	}
	if err := s.cl.c.Create(ctx, att); err != nil {
		return fmt.Errorf("failed to create attachment %s: %w", att.Name, err)
	}
	s.bridges = append(s.bridges, s.bridge)
	deadline := time.Now().Add(agentPhaseWait)
	for {
		ok, why := s.bridgesOK(ctx, false)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent did not make bridge %s: %s", s.bridge, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stateDir := filepath.Join(s.o.WorkDir, "streams-state")
	s.n = &node{plugin: s.plugin(), cniPath: s.o.CNIPath, datapath: netconf.DatapathLinuxBridge, bridge: s.bridge, network: "fp-soak-streams",
		stateDir: stateDir, ipamDir: netconf.IPAMDataDir(stateDir), nodeConfig: filepath.Join(s.o.WorkDir, "node-streams.json")}
	if err := netconf.WriteNodeConfig(s.n.nodeConfig, netconf.NodeConfig{StateDir: stateDir}); err != nil {
		return err
	}
	s.n.conf, _ = json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": s.n.network, "namespace": soakNamespace, "type": wellknown.PluginType,
		"datapath": netconf.DatapathLinuxBridge, "bridge": s.bridge, "mtu": 9000,
		"ipam": map[string]any{"type": "host-local", "subnet": "10.253.0.0/24"}})
	return nil
}

// plugin is the CNI binary the agent installed, or the one it installs.
func (s *streamsRun) plugin() string {
	installed := filepath.Join(s.o.WorkDir, "cni-bin", wellknown.PluginType)
	if _, err := os.Stat(installed); err == nil {
		return installed
	}
	return s.o.Plugin
}

// add makes a network namespace into *netns and runs the plugin's ADD for
// it; it returns the address IPAM gave.
func (s *streamsRun) add(ctx context.Context, netns *ns.NetNS) (net.IP, error) {
	var err error
	if *netns, err = testutils.NewNS(); err != nil {
		return nil, fmt.Errorf("failed to create a network namespace: %w", err)
	}
	req := request{command: "ADD", containerID: s.n.containerID(), netns: (*netns).Path(), ifName: "eth0", conf: s.n.conf}
	out, err := s.n.exec(ctx, req)
	if err != nil {
		return nil, err
	}
	s.adds = append(s.adds, req)
	res := &types100.Result{}
	if err := json.Unmarshal(out, res); err != nil || len(res.IPs) == 0 {
		return nil, fmt.Errorf("failed to read an address from the ADD result %q: %v", out, err)
	}
	return res.IPs[0].Address.IP, nil
}

// cleanup deletes the attachments (CNI DEL) and their namespaces; the
// bridge goes with the agent part's deleteBridges.
func (s *streamsRun) cleanup(ctx context.Context) {
	for _, req := range s.adds {
		req.command = "DEL"
		if _, err := s.n.exec(ctx, req); err != nil {
			s.t.leaked(1, fmt.Sprintf("DEL of %s failed: %v", req.containerID[:12], err))
		}
	}
	removeNS(s.nsA)
	removeNS(s.nsB)
	for _, p := range s.portNames {
		if _, err := netlink.LinkByName(p); err == nil {
			s.t.leaked(1, "port "+p+" after its DEL")
		}
		if exec.Command("nft", "list", "chain", "bridge", wellknown.PortSecurityTable, "port-"+p).Run() == nil {
			s.t.leaked(1, "port security chain port-"+p+" after its DEL")
		}
	}
}
