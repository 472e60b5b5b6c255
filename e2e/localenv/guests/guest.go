package guests

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
	"github.com/fastpath-io/fastpath/internal/vm/domainhook"
)

// Label is how every real guest is named in output.
const Label = "REAL VM (QEMU TCG, no KVM)"

// BootOptions describe one real guest of an emulated virt-launcher.
type BootOptions struct {
	// Namespace, Name and UID of the VMI.
	Namespace, Name, UID string
	// VMIJSON is the VMI as the sidecar-shim passes it to the hook (--vmi):
	// the fastpath.io/tuning annotation is read from it.
	VMIJSON []byte
	// Launcher is the launcher network namespace; its bridges (NIC.Bridge)
	// exist. The taps, libvirtd and QEMU live in it.
	Launcher *topology.NetNS
	// NICs are the VMI's interfaces in spec order (guest eth0, eth1, ...).
	NICs []NICSpec
	// MemoryMiB (default 512) and VCPUs (default 2).
	MemoryMiB, VCPUs int
	// Multiqueue is the VMI's networkInterfaceMultiqueue: multi-queue taps
	// and one queue pair per vCPU in the domain, as KubeVirt does.
	Multiqueue bool
	// VSOCKCID gives the guest a vsock device served by vhost-device-vsock
	// with its hybrid socket at VSOCKDir/<cid>.vsock; 0 for none.
	VSOCKCID uint32
	// VSOCKDir holds the hybrid vsock sockets (shared with the relay).
	VSOCKDir string
	// SiblingSocketDir is given to the domain hook as
	// $FASTPATH_SIBLING_SOCKET_DIR (domainhook.SiblingSocketDirEnv): where
	// the vhost-user sockets of vsock mode Sibling are. "" leaves the
	// hook's default (or this process's environment).
	SiblingSocketDir string
	// Dir is this guest's state directory (created; removed by Stop).
	Dir string
	// Bin is the directory with fastpath-domain-hook, vhost-device-vsock and
	// guest/{vmlinuz,initramfs.gz} (the repository's bin/).
	Bin string
	// BootTimeout bounds define-to-ready; 0 means 3 minutes.
	BootTimeout time.Duration
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// NICSpec is one guest NIC: the tap virt-launcher makes for it and the
// DHCP lease it serves on it.
type NICSpec struct {
	// Network is the VMI network name (domain alias ua-<Network>).
	Network string
	// Bridge is the launcher bridge the tap joins (k6t-eth0, k6t-<hash>).
	Bridge string
	// Tap is the tap device name (tap0, tap<hash>).
	Tap string
	// MTU of the tap and the domain's <mtu>: the pod interface's.
	MTU int
	// Lease is served on Bridge; Lease.MAC is the NIC's MAC.
	Lease DHCPLease
	// Macvtap says Tap is not a tap to make but the launcher namespace's
	// macvtap, made by the CNI plugin on datapath Macvtap: KubeVirt's
	// macvtap binding (domainAttachmentType tap) points the domain at the pod
	// interface itself, and virt-launcher makes no tap, no bridge and serves
	// no DHCP. Bridge and Lease.ServerIP are then unused, Lease.MAC must be
	// the macvtap's MAC (macvlan delivers only frames to it), and Stop leaves
	// the macvtap to the CNI plugin's DEL.
	Macvtap bool
}

// NIC is what the guest's virtio-net driver reports for one NIC, read
// inside the guest (sysfs and ethtool -g/-l/-k) and printed on its console.
type NIC struct {
	Name, MAC           string
	MTU, RX, TX, Queues int
	// TSO is "on" or "off" (tcp-segmentation-offload).
	TSO string
	// Features are the guest's ethtool -k features (the top-level lines,
	// e.g. "rx-checksumming"), each "on" or "off"; nil when the guest
	// printed no FPGUEST-FEATURES line for the NIC.
	Features map[string]string
	// Virtio are the virtio feature bits the guest's driver negotiated
	// with the device (/sys/class/net/<if>/device/features: '0' or '1'
	// per bit, bit 0 first); "" when the guest printed no FPGUEST-VIRTIO
	// line for the NIC. See VirtioFeature.
	Virtio string
	// IP is the address DHCP gave it ("none" when it got none).
	IP string
}

// Line is the demo's proof line: "guest <vm>: <ifname> mtu <N> rx <N> tx <N> queues <N> tso <on|off>".
func (n NIC) Line(vm string) string {
	return fmt.Sprintf("guest %s: %s mtu %d rx %d tx %d queues %d tso %s", vm, n.Name, n.MTU, n.RX, n.TX, n.Queues, n.TSO)
}

// VirtioFeature reports whether the guest negotiated virtio feature bit
// (virtio 1.2 §5.1.3, e.g. 1 for VIRTIO_NET_F_GUEST_CSUM); known is false
// when the guest did not report its bits.
func (n NIC) VirtioFeature(bit int) (on, known bool) {
	if bit < 0 || bit >= len(n.Virtio) {
		return false, false
	}
	return n.Virtio[bit] == '1', true
}

// Guest is a running real guest.
type Guest struct {
	Namespace, Name string
	// Domain is the XML libvirt defined (after the hook and node adjustments).
	Domain []byte
	// HookLog is what the hook printed on stderr.
	HookLog string
	// Adjustments are the EMULATED node changes made to the hooked domain.
	Adjustments []NodeAdjustment
	// NICs are read from inside the guest, in guest order.
	NICs []NIC
	// BootTime is from `virsh start` to the guest's ready line; GuestUptime
	// the guest kernel's uptime at that line.
	BootTime, GuestUptime time.Duration
	// Vsock is the guest's vhost-device-vsock (nil without vsock).
	Vsock *VsockBackend

	opts     BootOptions
	libvirtd *Libvirtd
	dhcp     []*DHCPServer
	taps     []string
	ctl      net.Conn
	ch       *controlChannel
	mu       sync.Mutex
}

// syncTimeout bounds the first exchange on a guest's control channel, and
// syncResend is how long a probe goes unanswered before another is sent.
const (
	syncTimeout = time.Minute
	syncResend  = 2 * time.Second
)

// Boot starts one real guest: it starts a libvirtd in the launcher
// namespace, creates the taps (multi-queue, on the launcher bridges),
// serves DHCP on each bridge, starts vhost-device-vsock when a CID is set,
// renders the KubeVirt-shaped domain, passes it through the real domain
// hook, adapts it to this node, validates it with virt-xml-validate, has
// libvirt define and start it, and waits for the guest's report. On error
// everything it made is undone.
func Boot(ctx context.Context, o BootOptions) (_ *Guest, err error) {
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 512
	}
	if o.VCPUs == 0 {
		o.VCPUs = 2
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 3 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Launcher == nil || o.Dir == "" || o.Bin == "" {
		return nil, fmt.Errorf("failed to boot %s/%s: Launcher, Dir and Bin are required", o.Namespace, o.Name)
	}
	g := &Guest{Namespace: o.Namespace, Name: o.Name, opts: o}
	defer func() {
		if err != nil {
			err = errors.Join(err, g.Stop())
		}
	}()
	// A socket path too long to bind is no reason to wait out libvirtd's
	// start: fail at once, naming it.
	for _, sock := range []string{filepath.Join(o.Dir, "libvirt", "run", "libvirt-sock"), filepath.Join(o.Dir, "control.sock"), filepath.Join(o.Dir, "vhost-user-vsock.sock")} {
		if err := runstate.CheckSocketPath(sock); err != nil {
			return nil, fmt.Errorf("failed to boot %s/%s: %w", o.Namespace, o.Name, err)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", o.Dir, err)
	}
	kernel, initrd := filepath.Join(o.Bin, "guest", "vmlinuz"), filepath.Join(o.Bin, "guest", "initramfs.gz")
	for _, f := range []string{kernel, initrd} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("failed to find the guest image %s (run hack/setup.sh): %w", f, err)
		}
	}
	if g.libvirtd, err = StartLibvirtd(ctx, o.Launcher.Name, filepath.Join(o.Dir, "libvirt")); err != nil {
		return nil, err
	}
	spec := DomainSpec{
		Namespace: o.Namespace, Name: o.Name, UID: o.UID, MemoryMiB: o.MemoryMiB, VCPUs: o.VCPUs,
		Kernel: kernel, Initrd: initrd,
		Cmdline:       fmt.Sprintf("console=ttyS0 loglevel=4 fp.vm=%s fp.nics=%d", o.Name, len(o.NICs)),
		ConsoleLog:    filepath.Join(o.Dir, "console.log"),
		ControlSocket: filepath.Join(o.Dir, "control.sock"),
		VSOCKCID:      o.VSOCKCID,
		Multiqueue:    o.Multiqueue,
	}
	for _, n := range o.NICs {
		if !n.Macvtap {
			if err := g.addTapAndDHCP(n); err != nil {
				return nil, err
			}
		}
		spec.Interfaces = append(spec.Interfaces, DomainInterface{Network: n.Network, Tap: n.Tap, MAC: n.Lease.MAC.String(), MTU: n.MTU})
	}
	vhostUser := ""
	if o.VSOCKCID != 0 {
		if o.VSOCKDir == "" {
			return nil, fmt.Errorf("failed to boot %s/%s: VSOCKDir is required with a VSOCKCID", o.Namespace, o.Name)
		}
		if err := os.MkdirAll(o.VSOCKDir, 0o755); err != nil {
			return nil, fmt.Errorf("failed to create %s: %w", o.VSOCKDir, err)
		}
		vhostUser = filepath.Join(o.Dir, "vhost-user-vsock.sock")
		uds := filepath.Join(o.VSOCKDir, strconv.FormatUint(uint64(o.VSOCKCID), 10)+".vsock")
		if g.Vsock, err = StartVsockBackend(filepath.Join(o.Bin, "vhost-device-vsock"), o.Launcher.Name, o.VSOCKCID, vhostUser, uds, filepath.Join(o.Dir, "vhost-device-vsock.log")); err != nil {
			return nil, err
		}
	}
	domain, err := ConvertDomain(spec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "domain-kubevirt.xml"), domain, 0o600); err != nil {
		return nil, err
	}
	var hookEnv []string
	if o.SiblingSocketDir != "" {
		hookEnv = append(hookEnv, domainhook.SiblingSocketDirEnv+"="+o.SiblingSocketDir)
	}
	hooked, hookLog, err := RunHook(filepath.Join(o.Bin, "fastpath-domain-hook"), o.Dir, o.VMIJSON, domain, hookEnv...)
	if err != nil {
		return nil, err
	}
	g.HookLog = hookLog
	if err := os.WriteFile(filepath.Join(o.Dir, "domain-hooked.xml"), hooked, 0o600); err != nil {
		return nil, err
	}
	if g.Domain, g.Adjustments, err = AdjustForNode(hooked, ProbeNode(), vhostUser); err != nil {
		return nil, err
	}
	for _, a := range g.Adjustments {
		o.Logf("EMULATED node: %s/%s: %s", o.Namespace, o.Name, a.What)
	}
	if err := ValidateDomain(o.Dir, g.Domain); err != nil {
		return nil, err
	}
	if _, err := g.libvirtd.Virsh(ctx, "define", filepath.Join(o.Dir, "domain.xml")); err != nil {
		return nil, fmt.Errorf("libvirt refused the domain of %s/%s: %w", o.Namespace, o.Name, err)
	}
	start := time.Now()
	if _, err := g.libvirtd.Virsh(ctx, "start", DomainName(o.Namespace, o.Name)); err != nil {
		return nil, fmt.Errorf("libvirt failed to start %s/%s: %w", o.Namespace, o.Name, err)
	}
	if err := g.waitReady(ctx, spec.ConsoleLog, 0, o.BootTimeout); err != nil {
		return nil, err
	}
	g.BootTime = time.Since(start)
	c, err := net.DialTimeout("unix", spec.ControlSocket, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("failed to open the control channel of %s/%s: %w", o.Namespace, o.Name, err)
	}
	g.ctl, g.ch = c, newControlChannel(c, o.Namespace+"/"+o.Name)
	sctx, cancel := context.WithTimeoutCause(ctx, syncTimeout, fmt.Errorf("no answer within %s", syncTimeout))
	err = g.ch.sync(sctx, syncResend)
	cancel()
	if err != nil {
		return nil, g.withDiagnostics(fmt.Errorf("failed to synchronise the control channel of %s/%s: %w", o.Namespace, o.Name, err))
	}
	o.Logf("%s %s/%s booted in %s (guest kernel uptime %s), %d NIC(s)", Label, o.Namespace, o.Name,
		g.BootTime.Round(100*time.Millisecond), g.GuestUptime.Round(10*time.Millisecond), len(g.NICs))
	return g, nil
}

// addTapAndDHCP makes the tap of n on its launcher bridge and serves n's
// DHCP lease there, as virt-launcher's bridge binding does.
func (g *Guest) addTapAndDHCP(n NICSpec) error {
	o := g.opts
	if err := addTap(o.Launcher, n.Tap, n.Bridge, n.MTU, o.Multiqueue); err != nil {
		return err
	}
	g.taps = append(g.taps, n.Tap)
	if err := ensureServerIP(o.Launcher, n.Bridge, n.Lease.ServerIP); err != nil {
		return err
	}
	s, err := ServeDHCP(o.Launcher, n.Bridge, n.Lease)
	if err != nil {
		return err
	}
	g.dhcp = append(g.dhcp, s)
	return nil
}

// waitReady reads the console log from offset (in bytes) until the guest's
// FPGUEST-READY line and parses its FPGUEST lines.
func (g *Guest) waitReady(ctx context.Context, consoleLog string, offset int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(consoleLog)
		b = b[min(offset, int64(len(b))):]
		nics, uptime, ready, perr := ParseConsole(string(b), g.Name)
		if perr != nil {
			return fmt.Errorf("guest %s/%s: %w", g.Namespace, g.Name, perr)
		}
		if ready {
			g.NICs, g.GuestUptime = nics, uptime
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("guest %s/%s did not report ready within %s; console: %s", g.Namespace, g.Name, timeout, tail(consoleLog, 1500))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for the FPGUEST-READY line of %s/%s in %s: %w; console: %s", g.Namespace, g.Name, consoleLog, context.Cause(ctx), tail(consoleLog, 1500))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ParseConsole reads the guest's report lines from its console output:
// "FPGUEST <vm> <if> mac <mac> mtu <N> rx <N> tx <N> queues <N> tso <s> ip <cidr>"
// per NIC, followed by "FPGUEST-FEATURES <vm> <if> <feature>=<on|off> ..."
// and "FPGUEST-VIRTIO <vm> <if> <bits>", and "FPGUEST-READY <vm> <uptime
// seconds>". ready is false until the ready
// line is there; an "FPGUEST-ERROR" line is an error.
func ParseConsole(console, vm string) (nics []NIC, uptime time.Duration, ready bool, err error) {
	// The console is read while QEMU writes it: a last line without its
	// newline is still being written (a long FPGUEST-FEATURES line was once
	// read cut after "loopback=off r") and waits for the next read.
	if i := strings.LastIndexByte(console, '\n'); i >= 0 {
		console = console[:i+1]
	} else {
		console = ""
	}
	for _, line := range strings.Split(console, "\n") {
		line = strings.TrimSpace(strings.TrimRight(line, "\r"))
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "FPGUEST-ERROR":
			return nil, 0, false, fmt.Errorf("the guest reported %q", line)
		case "FPGUEST-READY":
			if len(f) == 3 && f[1] == vm {
				s, perr := strconv.ParseFloat(f[2], 64)
				if perr != nil {
					return nil, 0, false, fmt.Errorf("malformed ready line %q", line)
				}
				return nics, time.Duration(s * float64(time.Second)), true, nil
			}
		case "FPGUEST":
			if len(f) != 17 || f[1] != vm {
				continue
			}
			n := NIC{Name: f[2]}
			kv := map[string]string{}
			for i := 3; i+1 < len(f); i += 2 {
				kv[f[i]] = f[i+1]
			}
			n.MAC, n.TSO, n.IP = kv["mac"], kv["tso"], kv["ip"]
			for k, dst := range map[string]*int{"mtu": &n.MTU, "rx": &n.RX, "tx": &n.TX, "queues": &n.Queues} {
				v, perr := strconv.Atoi(kv[k])
				if perr != nil {
					return nil, 0, false, fmt.Errorf("malformed %s %q in %q", k, kv[k], line)
				}
				*dst = v
			}
			nics = append(nics, n)
		case "FPGUEST-FEATURES":
			if len(f) < 3 || f[1] != vm || len(nics) == 0 || nics[len(nics)-1].Name != f[2] {
				continue
			}
			n := &nics[len(nics)-1]
			n.Features = map[string]string{}
			for _, kv := range f[3:] {
				name, state, ok := strings.Cut(kv, "=")
				if !ok || (state != "on" && state != "off") {
					return nil, 0, false, fmt.Errorf("malformed feature %q in %q", kv, line)
				}
				n.Features[name] = state
			}
		case "FPGUEST-VIRTIO":
			if len(f) != 4 || f[1] != vm || len(nics) == 0 || nics[len(nics)-1].Name != f[2] {
				continue
			}
			if strings.Trim(f[3], "01") != "" {
				if f[3] == "unknown" {
					continue
				}
				return nil, 0, false, fmt.Errorf("malformed virtio feature bits %q in %q", f[3], line)
			}
			nics[len(nics)-1].Virtio = f[3]
		}
	}
	return nil, 0, false, nil
}

// NIC returns the guest NIC with the given MAC.
func (g *Guest) NIC(mac string) (NIC, bool) {
	for _, n := range g.NICs {
		if strings.EqualFold(n.MAC, mac) {
			return n, true
		}
	}
	return NIC{}, false
}

// Run runs a shell command inside the guest over the control channel and
// returns its output and exit code. Commands run one at a time; end a
// command with '&' to leave it running. ctx bounds the wait (5 minutes when
// it has no deadline). When no answer comes, the error (and the log) carry
// what was waited for, the channel's last lines, the guest console's tail
// and QEMU's state.
func (g *Guest) Run(ctx context.Context, command string) (string, int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctl == nil {
		return "", -1, fmt.Errorf("guest %s/%s is not running", g.Namespace, g.Name)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, 5*time.Minute, errors.New("no answer within the default 5m"))
		defer cancel()
	}
	d, _ := ctx.Deadline()
	_ = g.ctl.SetWriteDeadline(d)
	defer func() { _ = g.ctl.SetWriteDeadline(time.Time{}) }()
	out, rc, err := g.ch.run(ctx, command)
	if err != nil {
		return out, rc, g.withDiagnostics(err)
	}
	return out, rc, nil
}

// Reboot reboots the guest from inside: `reboot -f`, delayed 1 s in the
// guest so that the command's answer leaves first (the image's PID 1 is
// /init, a shell script, which ignores the signal a plain busybox reboot
// sends it). The domain keeps libvirt's default on_reboot, restart, so QEMU
// resets the machine within the same process: its vhost-user connections,
// its serial and virtio-serial ports and the host's control connection
// stay (QEMU keeps the host's bytes in the socket until the new init opens
// the port), and the guest's kernel and drivers start over. Reboot waits
// for the new boot's FPGUEST-READY line on the console (within
// BootOptions.BootTimeout) and synchronises the control channel again, and
// returns the time from the command's answer to the synchronised channel. Afterwards NICs and
// GuestUptime are the new boot's; whatever was started in the guest
// (sinks, services, files in /tmp) is gone. ctx bounds every wait.
func (g *Guest) Reboot(ctx context.Context) (time.Duration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctl == nil {
		return 0, fmt.Errorf("guest %s/%s is not running", g.Namespace, g.Name)
	}
	consoleLog := filepath.Join(g.opts.Dir, "console.log")
	fi, err := os.Stat(consoleLog)
	if err != nil {
		return 0, fmt.Errorf("failed to read the console log of %s/%s: %w", g.Namespace, g.Name, err)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, time.Minute, errors.New("no answer within 1m"))
	d, _ := cctx.Deadline()
	_ = g.ctl.SetWriteDeadline(d)
	out, rc, err := g.ch.run(cctx, "reboot -f -d 1 >/dev/null 2>&1 &")
	cancel()
	_ = g.ctl.SetWriteDeadline(time.Time{})
	if err == nil && rc != 0 {
		err = fmt.Errorf("exit %d: %s", rc, strings.TrimSpace(out))
	}
	if err != nil {
		return 0, g.withDiagnostics(fmt.Errorf("failed to reboot %s/%s: %w", g.Namespace, g.Name, err))
	}
	start := time.Now()
	if err := g.waitReady(ctx, consoleLog, fi.Size(), g.opts.BootTimeout); err != nil {
		return 0, g.withDiagnostics(fmt.Errorf("after reboot: %w", err))
	}
	sctx, cancel := context.WithTimeoutCause(ctx, syncTimeout, fmt.Errorf("no answer within %s", syncTimeout))
	err = g.ch.sync(sctx, syncResend)
	cancel()
	if err != nil {
		return 0, g.withDiagnostics(fmt.Errorf("failed to synchronise the control channel of %s/%s after its reboot: %w", g.Namespace, g.Name, err))
	}
	took := time.Since(start)
	g.opts.Logf("%s %s/%s rebooted in %s (guest kernel uptime %s)", Label, g.Namespace, g.Name, took.Round(100*time.Millisecond), g.GuestUptime.Round(10*time.Millisecond))
	return took, nil
}

// withDiagnostics adds to err what shows why a guest did not answer: the
// last lines of its control channel, its console's tail and QEMU's state as
// libvirt and the QEMU monitor report it. It logs the same.
func (g *Guest) withDiagnostics(err error) error {
	var b strings.Builder
	if g.ch != nil {
		fmt.Fprintf(&b, "\n--- last lines on the control channel of %s/%s:\n%s", g.Namespace, g.Name, strings.Join(g.ch.Recent(), "\n"))
	}
	consoleLog := filepath.Join(g.opts.Dir, "console.log")
	fmt.Fprintf(&b, "\n--- tail of %s:\n%s", consoleLog, tail(consoleLog, 2000))
	if g.libvirtd != nil {
		// ctx of the failed wait is done: QEMU's state gets its own bound.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		dom := DomainName(g.Namespace, g.Name)
		for _, args := range [][]string{
			{"domstate", "--reason", dom},
			{"qemu-monitor-command", "--hmp", dom, "info status"},
			{"qemu-monitor-command", "--hmp", dom, "info chardev"},
			{"qemu-monitor-command", "--hmp", dom, "info registers"},
		} {
			out, verr := g.libvirtd.Virsh(ctx, args...)
			if verr != nil {
				out = verr.Error()
			}
			if args[0] == "qemu-monitor-command" && args[len(args)-1] == "info registers" && len(out) > 600 {
				out = out[:600] + "..."
			}
			fmt.Fprintf(&b, "\n--- virsh %s:\n%s", strings.Join(args, " "), strings.TrimSpace(out))
		}
	}
	if g.opts.Logf != nil {
		g.opts.Logf("%s %s/%s: %v%s", Label, g.Namespace, g.Name, err, b.String())
	}
	return fmt.Errorf("%w%s", err, b.String())
}

// Stop destroys the domain, stops libvirtd, virtlogd, QEMU,
// vhost-device-vsock and the DHCP servers, deletes the taps and removes the
// state directory. Safe to call more than once and on a partial guest.
func (g *Guest) Stop() error {
	started := time.Now()
	defer func() {
		if g.opts.Logf != nil && g.BootTime > 0 {
			g.opts.Logf("%s %s/%s stopped in %s", Label, g.Namespace, g.Name, time.Since(started).Round(100*time.Millisecond))
		}
	}()
	var errs []error
	if g.ctl != nil {
		_ = g.ctl.Close()
		g.ctl = nil
	}
	if err := g.libvirtd.Stop(); err != nil {
		errs = append(errs, err)
	}
	g.libvirtd = nil
	if err := g.Vsock.Stop(); err != nil {
		errs = append(errs, err)
	}
	g.Vsock = nil
	for _, s := range g.dhcp {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	g.dhcp = nil
	for _, t := range g.taps {
		if err := deleteLink(g.opts.Launcher, t); err != nil {
			errs = append(errs, err)
		}
	}
	g.taps = nil
	if g.opts.Dir != "" {
		if err := os.RemoveAll(g.opts.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
