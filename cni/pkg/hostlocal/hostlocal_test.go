package hostlocal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/hostlocal"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

var bins *cnitest.Binaries

func TestMain(m *testing.M) {
	os.Exit(cnitest.Main(m, false, &bins))
}

// network is the network name of the tests' configurations.
const network = "fp-hl"

// conf is an IPAM network configuration of host-local on cnitest.Subnet
// with its data in dataDir, as the plugin hands it over (netconf.IPAMConf).
func conf(dataDir string) []byte {
	data, _ := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": network, "type": "fastpath",
		"ipam": map[string]any{"type": "host-local", "subnet": cnitest.Subnet, "dataDir": dataDir,
			"routes": []map[string]any{{"dst": "10.99.0.0/16"}}},
	})
	return data
}

// binary is a host-local binary the in-process one must match.
type binary struct {
	path string
	// modes: its files have the in-process one's modes (0600). Debian's
	// v1.1.1 writes 0644; v1.9.1, which the image ships, 0600.
	modes bool
}

// binaries are Debian bookworm's v1.1.1 (what the tests and older nodes
// run) and v1.9.1 from go.mod (what the image ships).
func binaries() map[string]binary {
	return map[string]binary{
		"debian": {path: filepath.Join(cnitest.SystemCNIPath, "host-local")},
		"v1.9.1": {path: filepath.Join(bins.Dir, "host-local"), modes: true},
	}
}

// execBinary runs the host-local binary for command and args, for a pod in
// netns, as the plugin executes it.
func execBinary(binary string, netns ns.NetNS, command string, args hostlocal.Args, stdin []byte) ([]byte, error) {
	env := []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + args.ContainerID, "CNI_IFNAME=" + args.IfName,
		"CNI_NETNS=" + netns.Path(), "CNI_PATH=" + filepath.Dir(binary), "CNI_ARGS=" + args.CNIArgs}
	stdout, stderr, err := cnitest.Exec(context.Background(), binary, env, stdin)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s %s", binary, command, err, stdout, stderr)
	}
	return stdout, nil
}

// files maps each file under dir (relative name) to its content and, with
// modes, its mode.
func files(t *testing.T, dir string, modes bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel+"/"] = info.Mode().String()
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%q", data)
		if modes {
			out[rel] = info.Mode().String() + " " + out[rel]
		}
		return nil
	})
	if err != nil {
		t.Fatalf("failed to read %s: %v", dir, err)
	}
	return out
}

// addresses are the addresses of an ADD result.
func addresses(r *current.Result) []string {
	var out []string
	for _, ip := range r.IPs {
		out = append(out, ip.Address.String()+" gw "+ip.Gateway.String())
	}
	return out
}

// TestSameAsBinary runs one sequence of ADDs and DELs through the
// in-process host-local and through each host-local binary, each with a
// data directory of its own, and compares after every step: the same
// success or failure, the same addresses, and the same files (names,
// contents, modes) in the data directory. The sequence covers an ADD
// getting the first address of the range; a second ADD of the same
// container ID and interface refused without allocating anything (host-local
// allows no duplicate; the plugin answers a repeated ADD from its own
// record before IPAM is asked); another interface of that container
// getting its own address; an address requested by CNI_ARGS IP=; DEL
// freeing exactly the attachment's address, and a repeated DEL succeeding;
// round-robin allocation after a release.
func TestSameAsBinary(t *testing.T) {
	testutil.RequireRoot(t)
	steps := []struct {
		command string
		args    hostlocal.Args
		fails   bool
	}{
		{"ADD", hostlocal.Args{ContainerID: "c1", IfName: "net1"}, false},
		{"ADD", hostlocal.Args{ContainerID: "c2", IfName: "net1"}, false},
		{"ADD", hostlocal.Args{ContainerID: "c1", IfName: "net1"}, true},
		{"ADD", hostlocal.Args{ContainerID: "c1", IfName: "net2"}, false},
		{"ADD", hostlocal.Args{ContainerID: "c3", IfName: "net1", CNIArgs: "IgnoreUnknown=1;IP=10.250.0.200"}, false},
		{"ADD", hostlocal.Args{ContainerID: "c4", IfName: "net1", CNIArgs: "IgnoreUnknown=1;IP=10.250.0.200"}, true},
		{"DEL", hostlocal.Args{ContainerID: "c1", IfName: "net1"}, false},
		{"DEL", hostlocal.Args{ContainerID: "c1", IfName: "net1"}, false},
		{"ADD", hostlocal.Args{ContainerID: "c5", IfName: "net1"}, false},
		{"DEL", hostlocal.Args{ContainerID: "c3", IfName: "net1"}, false},
		{"ADD", hostlocal.Args{ContainerID: "c1", IfName: "net1"}, false},
	}
	for name, bin := range binaries() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			netns := cnitest.NewNS(t)
			binDir, inDir := t.TempDir(), t.TempDir()
			for i, s := range steps {
				step := fmt.Sprintf("step %d: %s %+v", i, s.command, s.args)
				var (
					want, got       *current.Result
					binErr, procErr error
				)
				switch s.command {
				case "ADD":
					var out []byte
					if out, binErr = execBinary(bin.path, netns, "ADD", s.args, conf(binDir)); binErr == nil {
						want = &current.Result{}
						binErr = json.Unmarshal(out, want)
					}
					got, procErr = hostlocal.Add(s.args, conf(inDir))
				case "DEL":
					_, binErr = execBinary(bin.path, netns, "DEL", s.args, conf(binDir))
					procErr = hostlocal.Del(s.args, conf(inDir))
				}
				g.Expect(binErr != nil).To(Equal(s.fails), "%s: binary: %v", step, binErr)
				g.Expect(procErr != nil).To(Equal(s.fails), "%s: in-process: %v", step, procErr)
				if want != nil {
					g.Expect(addresses(got)).To(Equal(addresses(want)), step)
					g.Expect(got.Routes).To(Equal(want.Routes), step)
				}
				g.Expect(files(t, inDir, bin.modes)).To(Equal(files(t, binDir, bin.modes)), "%s: the data directories differ", step)
			}
			g.Expect(files(t, inDir, true)).To(HaveKey(filepath.Join(network, "lock")))
			g.Expect(files(t, inDir, true)).To(HaveKeyWithValue(filepath.Join(network, "10.250.0.4"), `-rw------- "c1\r\nnet2"`))
		})
	}
}

// TestAllocationsCrossOver: an address the binary allocated is released by
// the in-process DEL and the other way round (nodes that ran the binary
// before the upgrade, and GC, which still asks the binary), and CHECK finds
// the binary's allocation.
func TestAllocationsCrossOver(t *testing.T) {
	testutil.RequireRoot(t)
	for name, bin := range binaries() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			netns := cnitest.NewNS(t)
			dir := t.TempDir()
			a, b := hostlocal.Args{ContainerID: "from-binary", IfName: "net1"}, hostlocal.Args{ContainerID: "in-process", IfName: "net1"}
			_, err := execBinary(bin.path, netns, "ADD", a, conf(dir))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(hostlocal.Check(a, conf(dir))).To(Succeed())
			r, err := hostlocal.Add(b, conf(dir))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(addresses(r)).To(Equal([]string{"10.250.0.3/24 gw 10.250.0.1"}), "the address after the binary's")
			_, err = execBinary(bin.path, netns, "CHECK", b, conf(dir))
			g.Expect(err).NotTo(HaveOccurred(), "the binary finds the in-process allocation")

			g.Expect(hostlocal.Del(a, conf(dir))).To(Succeed())
			_, err = execBinary(bin.path, netns, "DEL", b, conf(dir))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cnitest.Allocations(t, dir, network)).To(BeEmpty())
			g.Expect(hostlocal.Check(a, conf(dir))).NotTo(Succeed(), "CHECK of a released attachment fails")
		})
	}
}

// TestReserveTakenAddress: Reserve of an address another attachment holds
// reports false and leaves that file as it was, and no unnamed or temporary
// file is left in the directory.
func TestReserveTakenAddress(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	s, err := hostlocal.NewStore(network, dir)
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	g.Expect(s.Lock()).To(Succeed())
	defer s.Unlock()
	ip := []byte{10, 250, 0, 7}
	ok, err := s.Reserve("first", "net1", ip, "0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	ok, err = s.Reserve("second", "net1", ip, "0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())
	data, err := os.ReadFile(filepath.Join(dir, network, "10.250.0.7"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(data).To(Equal([]byte("first\r\nnet1")))
	g.Expect(files(t, dir, false)).To(HaveLen(5), "the data and network directories, lock, the address and last_reserved_ip.0: %v", files(t, dir, false))
}
