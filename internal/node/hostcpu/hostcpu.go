package hostcpu

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// UserHZ is the unit of /proc/stat's CPU fields: USER_HZ, which the kernel
// fixes at 100 for user space on every architecture (sysconf(_SC_CLK_TCK);
// proc(5)).
const UserHZ = 100

// uidPattern is a pod UID as the API server makes it: a lower-case UUID.
var uidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ErrNotFound: no pod cgroup with that UID on this node.
var ErrNotFound = errors.New("no pod cgroup with that uid on this node")

// ValidUID reports whether uid has the form of a pod UID (a lower-case
// UUID): the only form a client's input takes on its way to a path.
func ValidUID(uid string) bool { return uidPattern.MatchString(uid) }

// PodCgroup returns the cgroup of the pod with uid, relative to root (the
// cgroup v2 mount), trying the kubelet's layouts for the default cgroup
// root in turn:
//
//	systemd driver:  kubepods.slice/kubepods-pod<uid>.slice                                  (Guaranteed)
//	                 kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice       (Burstable, BestEffort)
//	cgroupfs driver: kubepods/pod<uid>, kubepods/<qos>/pod<uid>
//
// with the systemd driver's "-" of the UID written "_" (kubelet
// pkg/kubelet/cm cgroup_manager_linux.go, ConvertCgroupNameToSystemd). The
// first one with a cpu.stat wins. It returns ErrNotFound when none has,
// and an error for a uid that is not a UUID.
func PodCgroup(root, uid string) (string, error) {
	if !ValidUID(uid) {
		return "", fmt.Errorf("failed to find the cgroup of pod %q: not a pod uid (a lower-case UUID)", uid)
	}
	us := strings.ReplaceAll(uid, "-", "_")
	candidates := []string{"kubepods.slice/kubepods-pod" + us + ".slice", "kubepods/pod" + uid}
	for _, qos := range []string{"burstable", "besteffort"} {
		candidates = append(candidates,
			"kubepods.slice/kubepods-"+qos+".slice/kubepods-"+qos+"-pod"+us+".slice",
			"kubepods/"+qos+"/pod"+uid)
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(root, c, "cpu.stat")); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("failed to find the cgroup of pod %s under %s: %w", uid, root, ErrNotFound)
}

// UsageUsec returns usage_usec of the cpu.stat in dir: the CPU time of the
// cgroup and its descendants in microseconds (Documentation/admin-guide/cgroup-v2.rst).
func UsageUsec(dir string) (uint64, error) {
	f, err := os.Open(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("failed to read cpu.stat of cgroup %s: %w", dir, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == "usage_usec" {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("failed to parse usage_usec %q in cgroup %s: %w", v, dir, err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("failed to read cpu.stat of cgroup %s: %w", dir, err)
	}
	return 0, fmt.Errorf("failed to find usage_usec in cpu.stat of cgroup %s", dir)
}

// ProcStatCPU returns the aggregate "cpu" line of the /proc/stat at path,
// with runs of spaces kept as the kernel wrote them.
func ProcStatCPU(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("failed to read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "cpu ") {
			if _, err := results.ProcStatSoftirq(line); err != nil {
				return "", err
			}
			return line, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("failed to read %s: %w", path, err)
	}
	return "", fmt.Errorf("failed to find the cpu line in %s", path)
}

// Reader reads the counters of a HostCPUReading.
type Reader struct {
	// Node is this node's name.
	Node string
	// CgroupRoot is the host's cgroup v2 mount (the chart mounts the host's
	// /sys/fs/cgroup read-only at /host/sys/fs/cgroup: the agent's own
	// /sys/fs/cgroup is its container's cgroup namespace).
	CgroupRoot string
	// ProcStat is the node's /proc/stat (not namespaced: the agent's own
	// /proc/stat is the node's).
	ProcStat string
	// DevKVM is the node's /dev/kvm (the agent's --dev-dir + "/kvm").
	DevKVM string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Read reads the pods' usage_usec (in the order of uids) and the node's
// cpu line at one instant, as near as reading files one after another
// gets. A uid whose cgroup is not found fails with ErrNotFound.
func (r Reader) Read(uids []string) (results.HostCPUReading, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	out := results.HostCPUReading{Node: r.Node, UserHZ: UserHZ, Pods: make([]results.PodCPU, 0, len(uids))}
	dirs := make([]string, len(uids))
	for i, uid := range uids {
		c, err := PodCgroup(r.CgroupRoot, uid)
		if err != nil {
			return results.HostCPUReading{}, err
		}
		dirs[i] = c
	}
	out.Time = now().UTC()
	for i, uid := range uids {
		u, err := UsageUsec(filepath.Join(r.CgroupRoot, dirs[i]))
		if err != nil {
			return results.HostCPUReading{}, err
		}
		out.Pods = append(out.Pods, results.PodCPU{UID: uid, Cgroup: dirs[i], UsageUsec: u})
	}
	line, err := ProcStatCPU(r.ProcStat)
	if err != nil {
		return results.HostCPUReading{}, err
	}
	out.ProcStatCPU = line
	if r.DevKVM != "" {
		_, err := os.Stat(r.DevKVM)
		out.KVM = err == nil
	}
	return out, nil
}
