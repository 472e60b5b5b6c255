package hostcpu_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/internal/node/hostcpu"
)

const (
	guaranteed = "6f1c2b9a-6d1e-4f0b-9a51-0c7d3e2a1b01"
	burstable  = "0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f02"
	besteffort = "3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c03"
	noCPU      = "11111111-2222-4333-8444-555555555555"
	elsewhere  = "99999999-8888-4777-8666-555555555555"
	// procStat is testdata/proc-stat's cpu line, recorded on a 2-CPU node.
	procStat = "cpu  3117572 45920 1147064 4871844 51683 0 250989 1215 11 0"
)

// The kubelet's two cgroup drivers on cgroup v2, each QoS class, and cgroup
// v1 as make cluster's kubelet lays it out (cgroupfs under --cgroup-root
// /fastpath-cluster, cpuacct in nanoseconds): recorded counter files, the
// pod's cgroup, never a slice's total above it.
func TestPodCgroupAndUsage(t *testing.T) {
	cases := []struct {
		layout, uid, cgroup, file string
		usage                     uint64
		wantErr                   string
	}{
		{"systemd", guaranteed, "kubepods.slice/kubepods-pod6f1c2b9a_6d1e_4f0b_9a51_0c7d3e2a1b01.slice", "cpu.stat", 812345678, ""},
		{"systemd", burstable, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d9e8f7a_1b2c_4d3e_8f4a_5b6c7d8e9f02.slice", "cpu.stat", 790123456, ""},
		{"systemd", besteffort, "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod3a4b5c6d_7e8f_4a0b_9c1d_2e3f4a5b6c03.slice", "cpu.stat", 1234567, ""},
		{"cgroupfs", guaranteed, "kubepods/pod6f1c2b9a-6d1e-4f0b-9a51-0c7d3e2a1b01", "cpu.stat", 812345678, ""},
		{"cgroupfs", burstable, "kubepods/burstable/pod0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f02", "cpu.stat", 790123456, ""},
		{"cgroupfs", besteffort, "kubepods/besteffort/pod3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c03", "cpu.stat", 1234567, ""},
		{"v1-cluster", guaranteed, "cpuacct/fastpath-cluster/kubepods/pod6f1c2b9a-6d1e-4f0b-9a51-0c7d3e2a1b01", "cpuacct.usage", 812345678, ""},
		{"v1-cluster", burstable, "cpuacct/fastpath-cluster/kubepods/burstable/pod0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f02", "cpuacct.usage", 790123456, ""},
		{"cgroupfs", noCPU, "kubepods/burstable/pod11111111-2222-4333-8444-555555555555", "cpu.stat", 0, "failed to find usage_usec in cpu.stat"},
		{"systemd", elsewhere, "", "", 0, "no pod cgroup with that uid on this node"},
		{"v1-cluster", besteffort, "", "", 0, "no pod cgroup with that uid on this node"},
		{"nothing", guaranteed, "", "", 0, "failed to find a cgroup v2 mount or a cgroup v1 cpuacct hierarchy"},
		{"cgroupfs", "../../../etc", "", "", 0, "not a pod uid"},
		{"systemd", "6F1C2B9A-6D1E-4F0B-9A51-0C7D3E2A1B01", "", "", 0, "not a pod uid"},
		{"systemd", guaranteed + "/..", "", "", 0, "not a pod uid"},
	}
	for _, c := range cases {
		t.Run(c.layout+"/"+c.uid, func(t *testing.T) {
			g := gomega.NewWithT(t)
			root := filepath.Join("testdata", c.layout)
			cg, file, err := hostcpu.PodCgroup(root, c.uid)
			if c.cgroup == "" {
				g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(c.wantErr)))
				return
			}
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(cg).To(gomega.Equal(c.cgroup))
			g.Expect(file).To(gomega.Equal(c.file))
			u, err := hostcpu.UsageUsec(filepath.Join(root, cg), file)
			if c.wantErr != "" {
				g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(c.wantErr)))
				return
			}
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(u).To(gomega.Equal(c.usage))
		})
	}
}

func TestProcStatCPU(t *testing.T) {
	g := gomega.NewWithT(t)
	line, err := hostcpu.ProcStatCPU("testdata/proc-stat")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(line).To(gomega.Equal(procStat), "the aggregate line, not cpu0 or the softirq counts line")
	soft, err := results.ProcStatSoftirq(line)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(soft).To(gomega.Equal(uint64(250989)))

	bad := filepath.Join(t.TempDir(), "stat")
	g.Expect(os.WriteFile(bad, []byte("cpu0 1 2 3 4 5 6 7\n"), 0o600)).To(gomega.Succeed())
	_, err = hostcpu.ProcStatCPU(bad)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("failed to find the cpu line")))
}

func reader(layout string) hostcpu.Reader {
	at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	return hostcpu.Reader{Node: "node-1", CgroupRoot: filepath.Join("testdata", layout), ProcStat: "testdata/proc-stat", DevKVM: "testdata/no-kvm", Now: func() time.Time { return at }}
}

func TestRead(t *testing.T) {
	g := gomega.NewWithT(t)
	r, err := reader("systemd").Read([]string{burstable, guaranteed})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(r.Node).To(gomega.Equal("node-1"))
	g.Expect(r.UserHZ).To(gomega.Equal(100))
	g.Expect(r.ProcStatCPU).To(gomega.Equal(procStat))
	g.Expect(r.KVM).To(gomega.BeFalse(), "no /dev/kvm: TCG")
	g.Expect(r.Time).To(gomega.Equal(time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)))
	g.Expect(r.Pods).To(gomega.Equal([]results.PodCPU{
		{UID: burstable, Cgroup: "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d9e8f7a_1b2c_4d3e_8f4a_5b6c7d8e9f02.slice", File: "cpu.stat", UsageUsec: 790123456},
		{UID: guaranteed, Cgroup: "kubepods.slice/kubepods-pod6f1c2b9a_6d1e_4f0b_9a51_0c7d3e2a1b01.slice", File: "cpu.stat", UsageUsec: 812345678},
	}), "in the order asked")

	r, err = reader("v1-cluster").Read([]string{guaranteed})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(r.Pods).To(gomega.Equal([]results.PodCPU{{UID: guaranteed, Cgroup: "cpuacct/fastpath-cluster/kubepods/pod6f1c2b9a-6d1e-4f0b-9a51-0c7d3e2a1b01", File: "cpuacct.usage", UsageUsec: 812345678}}),
		"cgroup v1: nanoseconds in microseconds")

	kvm := reader("cgroupfs")
	kvm.DevKVM = "testdata/proc-stat" // any file that exists stands for /dev/kvm
	r, err = kvm.Read([]string{guaranteed})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(r.KVM).To(gomega.BeTrue())

	_, err = reader("cgroupfs").Read([]string{guaranteed, elsewhere})
	g.Expect(errors.Is(err, hostcpu.ErrNotFound)).To(gomega.BeTrue(), "%v", err)
}

func TestHandler(t *testing.T) {
	refused := "pod " + besteffort + " is not a virt-launcher pod on node node-1"
	h := hostcpu.Handler{Reader: reader("cgroupfs"), Log: logr.Discard(), Allowed: func(_ context.Context, uid string) error {
		if uid == besteffort {
			return errors.New(refused)
		}
		return nil
	}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	cases := []struct {
		name, method, query string
		code                int
		body                string
	}{
		{"two launchers", http.MethodGet, "?pod=" + guaranteed + "&pod=" + burstable, http.StatusOK, ""},
		{"no pod", http.MethodGet, "", http.StatusBadRequest, "ask for at least one pod"},
		{"a path for a uid", http.MethodGet, "?pod=..%2F..%2Fkubepods", http.StatusBadRequest, "not a pod uid"},
		{"not allowed", http.MethodGet, "?pod=" + guaranteed + "&pod=" + besteffort, http.StatusForbidden, refused},
		{"not on this node", http.MethodGet, "?pod=" + elsewhere, http.StatusNotFound, "no pod cgroup with that uid"},
		{"not a GET", http.MethodPost, "?pod=" + guaranteed, http.StatusMethodNotAllowed, "only GET"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			req, err := http.NewRequest(c.method, srv.URL+hostcpu.Path+c.query, nil)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			resp, err := http.DefaultClient.Do(req)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			defer resp.Body.Close()
			g.Expect(resp.StatusCode).To(gomega.Equal(c.code))
			if c.code != http.StatusOK {
				var b [512]byte
				n, _ := resp.Body.Read(b[:])
				g.Expect(string(b[:n])).To(gomega.ContainSubstring(c.body))
				return
			}
			var r results.HostCPUReading
			g.Expect(json.NewDecoder(resp.Body).Decode(&r)).To(gomega.Succeed())
			g.Expect(r.Pods).To(gomega.HaveLen(2))
			g.Expect(r.Pods[1].UsageUsec).To(gomega.Equal(uint64(790123456)))
			g.Expect(r.ProcStatCPU).To(gomega.Equal(procStat))
		})
	}
}
