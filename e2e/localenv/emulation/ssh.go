package emulation

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// sshShim is the `ssh` the emulated kubelet puts first on a runner's PATH. It
// stands in for OpenSSH and a guest's sshd: it parses the OpenSSH command
// line (options, "--", host or user@host, the remote command), looks the host up in
// the hosts file the emulation keeps (every launcher's pod and Multus
// addresses), checks that the identity file's public key is authorised in
// that guest (the keys of the VM's accessCredentials), and runs the command
// with /bin/sh -c inside the guest's network namespace (ip netns exec), as sshd hands it to
// the user's shell. A guest with a vsock CID gets FASTPATH_VSOCK_TRANSPORT
// (unix:<Options.VSOCKRoot>) and FASTPATH_VSOCK_CID in the command's
// environment, which fastpath-bench's vsock commands take as their transport
// defaults: the guest's vsock is the UNIX-socket emulation. Its errors say
// EMULATED and use ssh's exit status 255.
const sshShim = `#!/bin/sh
# EMULATED ssh, written by Fastpath's emulation (e2e/localenv/emulation): the
# guests are network namespaces, so "ssh -l user -- <guest address> <command>"
# runs <command> inside that guest's network namespace on this host.
set -u
hosts=%q
vsock_root=%q
key=""
while [ $# -gt 0 ]; do
  case "$1" in
    -i) key="$2"; shift 2 ;;
    -i*) key="${1#-i}"; shift ;;
    -[bcDEeFIJLlmOopQRSWw]) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then echo "ssh (EMULATED): no destination" >&2; exit 255; fi
target="$1"; shift
[ "${1:-}" = "--" ] && shift
host="${target#*@}"
line=$(awk -v h="$host" '$1 == h { print; exit }' "$hosts")
if [ -z "$line" ]; then
  echo "ssh: connect to host $host port 22: No route to host (EMULATED ssh: no emulated guest has address $host)" >&2
  exit 255
fi
netns=$(echo "$line" | awk '{ print $2 }')
keys=$(echo "$line" | awk '{ print $3 }')
vm=$(echo "$line" | awk '{ print $4 }')
cid=$(echo "$line" | awk '{ print $5 }')
if [ -z "$key" ] || [ ! -r "$key" ]; then
  echo "$target: Permission denied (publickey). (EMULATED ssh: no readable identity file given with -i)" >&2
  exit 255
fi
pub=$(ssh-keygen -y -f "$key" 2>/dev/null | awk '{ print $1 " " $2 }')
if [ -z "$pub" ] || ! awk '{ print $1 " " $2 }' "$keys" | grep -qxF "$pub"; then
  echo "$target: Permission denied (publickey). (EMULATED ssh: the key $key is not authorised in VM $vm)" >&2
  exit 255
fi
if [ -n "$vsock_root" ] && [ "$cid" != "-" ]; then
  export FASTPATH_VSOCK_TRANSPORT="unix:$vsock_root" FASTPATH_VSOCK_CID="$cid"
fi
# ip netns exec also mounts the namespace's own /sys, as the guest has.
exec ip netns exec "$(basename "$netns")" /bin/sh -c "$*"
`

func (e *Emulator) sshHostsFile() string { return filepath.Join(shimDir(e.opts.StateDir), "hosts") }

// SSHShimDir is the directory holding the emulated `ssh`; runners get it first
// on PATH.
func (e *Emulator) SSHShimDir() string { return shimDir(e.opts.StateDir) }

func (e *Emulator) writeSSHShim() error {
	p := filepath.Join(shimDir(e.opts.StateDir), "ssh")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(sshShim, e.sshHostsFile(), e.opts.VSOCKRoot)), 0o755); err != nil {
		return fmt.Errorf("failed to write the emulated ssh %s: %w", p, err)
	}
	return e.writeSSHHosts()
}

// writeSSHHosts rewrites the hosts file: "<address> <netns path>
// <authorized_keys> <namespace>/<vm> <vsock CID or ->" for the pod IP and
// every Multus address of every launcher.
func (e *Emulator) writeSSHHosts() error {
	e.mu.Lock()
	var lines []string
	for _, l := range e.launchers {
		if l.guest == nil {
			continue // a real guest has no sshd: the emulated ssh cannot reach it
		}
		addrs := []string{l.podIP.String()}
		for _, a := range l.nets {
			addrs = append(addrs, a.ips...)
		}
		cid := "-"
		if l.cid != nil {
			cid = strconv.FormatUint(uint64(*l.cid), 10)
		}
		for _, a := range addrs {
			lines = append(lines, strings.Join([]string{a, l.guest.Path, l.keysFile, l.key.String(), cid}, " "))
		}
	}
	e.mu.Unlock()
	sort.Strings(lines)
	e.hostsMu.Lock()
	defer e.hostsMu.Unlock()
	content := strings.Join(lines, "\n")
	if content != "" {
		content += "\n"
	}
	tmp := e.sshHostsFile() + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, e.sshHostsFile()); err != nil {
		return fmt.Errorf("failed to replace %s: %w", e.sshHostsFile(), err)
	}
	return nil
}
