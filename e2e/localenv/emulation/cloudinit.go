package emulation

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/bench/netperf"
)

// cloudConfig is the part of a #cloud-config document the emulation reads.
type cloudConfig struct {
	// RunCmd entries are a list of words or one shell string each.
	RunCmd []any `json:"runcmd"`
	// Packages to install (the emulation uses the host's).
	Packages []any `json:"packages"`
}

// userData returns the cloudInitNoCloud (or cloudInitConfigDrive) user data
// of the VMI, decoded, or "" when it has none. User data kept in a Secret is
// not read (the samples inline theirs).
func userData(vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	for _, v := range vmi.Spec.Volumes {
		var data, b64 string
		switch {
		case v.CloudInitNoCloud != nil:
			data, b64 = v.CloudInitNoCloud.UserData, v.CloudInitNoCloud.UserDataBase64
		case v.CloudInitConfigDrive != nil:
			data, b64 = v.CloudInitConfigDrive.UserData, v.CloudInitConfigDrive.UserDataBase64
		default:
			continue
		}
		if data != "" {
			return data, nil
		}
		if b64 != "" {
			raw, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return "", fmt.Errorf("failed to decode userDataBase64 of volume %s: %w", v.Name, err)
			}
			return string(raw), nil
		}
	}
	return "", nil
}

// parseCloudConfig parses #cloud-config user data; other formats (shell
// scripts, MIME multipart) yield an empty config.
func parseCloudConfig(data string) (cloudConfig, error) {
	var cc cloudConfig
	if !strings.HasPrefix(strings.TrimSpace(data), "#cloud-config") {
		return cc, nil
	}
	if err := yaml.Unmarshal([]byte(data), &cc); err != nil {
		return cc, fmt.Errorf("failed to parse #cloud-config user data: %w", err)
	}
	return cc, nil
}

// runCmds returns each runcmd entry as argv: a list of words as it is, a
// string split on white space.
func (cc cloudConfig) runCmds() [][]string {
	var out [][]string
	for _, c := range cc.RunCmd {
		switch v := c.(type) {
		case string:
			out = append(out, strings.Fields(v))
		case []any:
			argv := make([]string, 0, len(v))
			for _, w := range v {
				argv = append(argv, fmt.Sprint(w))
			}
			out = append(out, argv)
		}
	}
	return out
}

// netserverPort returns the control port of a `netserver` command line (-p,
// default 12865) and whether argv is one.
func netserverPort(argv []string) (int, bool, error) {
	if len(argv) == 0 || filepath.Base(argv[0]) != "netserver" {
		return 0, false, nil
	}
	port := netperf.DefaultControlPort
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-p" && i+1 < len(argv):
			p, err := strconv.Atoi(argv[i+1])
			if err != nil || p < 1 || p > 65535 {
				return 0, true, fmt.Errorf("failed to parse netserver port %q", argv[i+1])
			}
			port = p
			i++
		case strings.HasPrefix(a, "-p") && len(a) > 2:
			p, err := strconv.Atoi(a[2:])
			if err != nil || p < 1 || p > 65535 {
				return 0, true, fmt.Errorf("failed to parse netserver port %q", a[2:])
			}
			port = p
		}
	}
	return port, true, nil
}

// runCloudInit plays the guest's cloud-init: packages come from the host,
// runcmd entries that start netserver start it (in the foreground, -D, so
// the emulation can stop it) inside the launcher's namespace, and other
// entries are reported and skipped: the emulation does not run arbitrary
// guest commands on the host.
func (e *Emulator) runCloudInit(ctx context.Context, l *launcher, vmi *kubevirtv1.VirtualMachineInstance) error {
	data, err := userData(vmi)
	if err != nil || data == "" {
		return err
	}
	cc, err := parseCloudConfig(data)
	if err != nil {
		return err
	}
	if len(cc.Packages) > 0 {
		e.log.printf("cloud-init", "%s/%s: packages %v are used from the host, not installed", vmi.Namespace, vmi.Name, cc.Packages)
	}
	for _, argv := range cc.runCmds() {
		port, isNetserver, err := netserverPort(argv)
		if err != nil {
			return err
		}
		if !isNetserver {
			e.log.printf("cloud-init", "%s/%s: runcmd %q skipped (only netserver is emulated)", vmi.Namespace, vmi.Name, strings.Join(argv, " "))
			continue
		}
		ns, err := netperf.StartNetserver(ctx, netperf.NetserverOptions{Binary: e.opts.Netserver, Addr: "0.0.0.0", Port: port, NetNS: l.guest.Path})
		if err != nil {
			return fmt.Errorf("failed to start netserver for runcmd %q: %w", strings.Join(argv, " "), err)
		}
		l.netservers = append(l.netservers, ns)
		e.log.printf("cloud-init", "%s/%s: runcmd %q -> netserver -D listening on 0.0.0.0:%d in the guest %s", vmi.Namespace, vmi.Name, strings.Join(argv, " "), port, l.guest.Name)
	}
	return nil
}

// authorizedKeys collects the SSH public keys of the VMI's accessCredentials
// (sshPublicKey from a Secret, every value one or more keys), as the guest
// agent or cloud-init would install them, and writes them to path.
func (e *Emulator) authorizedKeys(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, path string) (int, error) {
	var keys []string
	for _, ac := range vmi.Spec.AccessCredentials {
		if ac.SSHPublicKey == nil || ac.SSHPublicKey.Source.Secret == nil {
			continue
		}
		name := ac.SSHPublicKey.Source.Secret.SecretName
		sec := &corev1.Secret{}
		if err := e.reader.Get(ctx, types.NamespacedName{Namespace: vmi.Namespace, Name: name}, sec); err != nil {
			return 0, fmt.Errorf("failed to get accessCredentials Secret %s/%s (virt-launcher waits for it): %w", vmi.Namespace, name, err)
		}
		names := make([]string, 0, len(sec.Data))
		for k := range sec.Data {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			for _, line := range strings.Split(string(sec.Data[k]), "\n") {
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					keys = append(keys, line)
				}
			}
		}
	}
	content := strings.Join(keys, "\n")
	if len(keys) > 0 {
		content += "\n"
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return 0, fmt.Errorf("failed to write authorized keys %s: %w", path, err)
	}
	return len(keys), nil
}
