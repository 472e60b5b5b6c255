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

// Counter files: what a pod cgroup's CPU time is read from.
const (
	// FileCPUStat is cgroup v2's cpu.stat, its usage_usec in microseconds.
	FileCPUStat = "cpu.stat"
	// FileCPUAcctUsage is cgroup v1's cpuacct.usage, in nanoseconds.
	FileCPUAcctUsage = "cpuacct.usage"
)

// hierarchy returns the directory under root (the host's /sys/fs/cgroup)
// whose tree holds pods' CPU time, and its counter file: root itself with
// cpu.stat when root is a cgroup v2 mount (it has cgroup.controllers), else
// the cgroup v1 cpuacct hierarchy (cpuacct, or cpu,cpuacct as systemd
// mounts it) with cpuacct.usage. A hybrid host (v1 controllers, an empty
// v2 tree at unified/) is v1 here, as its kubelet is.
func hierarchy(root string) (dir, file string, err error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return "", FileCPUStat, nil
	}
	for _, d := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
		if _, err := os.Stat(filepath.Join(root, d, FileCPUAcctUsage)); err == nil {
			return d, FileCPUAcctUsage, nil
		}
	}
	return "", "", fmt.Errorf("failed to find a cgroup v2 mount or a cgroup v1 cpuacct hierarchy under %s", root)
}

// maxKubepodsDepth bounds how deep under the hierarchy the kubelet's
// kubepods cgroup is looked for: "kubepods" with the default cgroup root,
// "<root>/kubepods" with the kubelet's --cgroup-root (make cluster's
// /fastpath-cluster, or /fastpath-cluster/<node> with several nodes).
const maxKubepodsDepth = 3

// kubepodsDirs lists the directories named kubepods or kubepods.slice at
// most maxKubepodsDepth levels under dir, relative to root.
func kubepodsDirs(root, dir string) []string {
	var out []string
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		entries, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			child := filepath.Join(rel, e.Name())
			if e.Name() == "kubepods" || e.Name() == "kubepods.slice" {
				out = append(out, child)
				continue
			}
			if depth < maxKubepodsDepth {
				walk(child, depth+1)
			}
		}
	}
	walk(dir, 1)
	return out
}

// PodCgroup returns the cgroup of the pod with uid, relative to root (the
// host's /sys/fs/cgroup), and the file its CPU time is read from
// (FileCPUStat or FileCPUAcctUsage; hierarchy). Under each kubepods cgroup
// of the kubelet (kubepodsDirs) it tries the kubelet's layouts:
//
//	systemd driver:  kubepods.slice/kubepods-pod<uid>.slice                            (Guaranteed)
//	                 kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice (Burstable, BestEffort)
//	cgroupfs driver: kubepods/pod<uid>, kubepods/<qos>/pod<uid>
//
// with the systemd driver's "-" of the UID written "_" (kubelet
// pkg/kubelet/cm cgroup_manager_linux.go, ConvertCgroupNameToSystemd). The
// first with the counter file wins. It returns ErrNotFound when none has
// it, and an error for a uid that is not a UUID: nothing else of the
// client's reaches a path.
func PodCgroup(root, uid string) (rel, file string, err error) {
	if !ValidUID(uid) {
		return "", "", fmt.Errorf("failed to find the cgroup of pod %q: not a pod uid (a lower-case UUID)", uid)
	}
	dir, file, err := hierarchy(root)
	if err != nil {
		return "", "", err
	}
	us := strings.ReplaceAll(uid, "-", "_")
	for _, kp := range kubepodsDirs(root, dir) {
		var candidates []string
		if filepath.Base(kp) == "kubepods.slice" {
			candidates = append(candidates, "kubepods-pod"+us+".slice")
			for _, qos := range []string{"burstable", "besteffort"} {
				candidates = append(candidates, "kubepods-"+qos+".slice/kubepods-"+qos+"-pod"+us+".slice")
			}
		} else {
			candidates = append(candidates, "pod"+uid, "burstable/pod"+uid, "besteffort/pod"+uid)
		}
		for _, c := range candidates {
			if _, err := os.Stat(filepath.Join(root, kp, c, file)); err == nil {
				return filepath.Join(kp, c), file, nil
			}
		}
	}
	return "", "", fmt.Errorf("failed to find the cgroup of pod %s under %s: %w", uid, root, ErrNotFound)
}

// UsageUsec returns the CPU time of the cgroup dir and its descendants in
// microseconds from its counter file: usage_usec of cgroup v2's cpu.stat
// (Documentation/admin-guide/cgroup-v2.rst), or cgroup v1's cpuacct.usage
// (nanoseconds) divided by 1000.
func UsageUsec(dir, file string) (uint64, error) {
	if file == FileCPUAcctUsage {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return 0, fmt.Errorf("failed to read cpuacct.usage of cgroup %s: %w", dir, err)
		}
		ns, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("failed to parse cpuacct.usage of cgroup %s: %w", dir, err)
		}
		return ns / 1000, nil
	}
	f, err := os.Open(filepath.Join(dir, FileCPUStat))
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
	// CgroupRoot is the host's /sys/fs/cgroup, a cgroup v2 mount or the
	// tmpfs of cgroup v1's hierarchies (the chart mounts it read-only at
	// /host/sys/fs/cgroup: the agent's own /sys/fs/cgroup is its
	// container's cgroup namespace).
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
	dirs, files := make([]string, len(uids)), make([]string, len(uids))
	for i, uid := range uids {
		c, f, err := PodCgroup(r.CgroupRoot, uid)
		if err != nil {
			return results.HostCPUReading{}, err
		}
		dirs[i], files[i] = c, f
	}
	out.Time = now().UTC()
	for i, uid := range uids {
		u, err := UsageUsec(filepath.Join(r.CgroupRoot, dirs[i]), files[i])
		if err != nil {
			return results.HostCPUReading{}, err
		}
		out.Pods = append(out.Pods, results.PodCPU{UID: uid, Cgroup: dirs[i], File: files[i], UsageUsec: u})
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
