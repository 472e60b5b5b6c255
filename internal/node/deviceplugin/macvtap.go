package deviceplugin

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fastpath-io/fastpath/api/netconf"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// DefaultMacvtapCapacity is how many macvtaps (VM interfaces) one node
// offers per Macvtap network: kubelet's default pod limit is 110.
const DefaultMacvtapCapacity = 128

// MacvtapBlock returns the first interface index of the device IDs of lower
// device lower with capacity devices: the tap index range
// [netconf.MinTapIndex, netconf.MaxTapIndex] cut into blocks of capacity,
// and the block chosen by FNV-1a of the lower's name, so that the agent
// gives a network the same device IDs after every restart and the CNI plugin
// needs nothing but the ID. capacity must be 1 to 2^20.
func MacvtapBlock(lower string, capacity int) int {
	blocks := (netconf.MaxTapIndex - netconf.MinTapIndex + 1) / capacity
	h := fnv.New32a()
	_, _ = h.Write([]byte(lower))
	return netconf.MinTapIndex + int(h.Sum32()%uint32(blocks))*capacity
}

// MacvtapResource returns the resource of the Macvtap network whose lower
// device is lower: macvtap.fastpath.io/<lower> with capacity devices
// "tap<N>" (netconf.FormatDeviceID) for N in the lower's block. Allocate
// gives a container /dev/tap<N> (host and container path, read-write) for
// each: the character device the kernel makes for the macvtap that the CNI
// plugin creates with interface index N when Multus passes it the ID.
func MacvtapResource(lower string, capacity int) Resource {
	first := MacvtapBlock(lower, capacity)
	ids := make([]string, capacity)
	for i := range ids {
		ids[i] = netconf.FormatDeviceID(first + i)
	}
	return Resource{
		Name:    fastpathv1alpha1.MacvtapResourceName(lower),
		Devices: ids,
		Allocate: func(ids []string) (*pluginapi.ContainerAllocateResponse, error) {
			resp := &pluginapi.ContainerAllocateResponse{}
			for _, id := range ids {
				n, err := netconf.ParseDeviceID(id)
				if err != nil {
					return nil, err
				}
				dev := fmt.Sprintf("/dev/tap%d", n)
				resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: dev, HostPath: dev, Permissions: "rw"})
			}
			return resp, nil
		},
	}
}

// Manager runs one Server per wanted resource. Its methods are safe for
// concurrent use.
type Manager struct {
	// Dir is kubelet's device plugin directory (pluginapi.DevicePluginPath).
	Dir string
	// KubeletSocket is kubelet's registration socket (pluginapi.KubeletSocket).
	KubeletSocket string
	// WatchInterval is passed to every Server (0: DefaultWatchInterval).
	WatchInterval time.Duration
	// Log receives the servers' lines.
	Log logr.Logger

	mu      sync.Mutex
	servers map[string]*managed
}

type managed struct {
	srv     *Server
	devices []string
}

// Want is one resource the node should offer and whether its devices are
// usable now.
type Want struct {
	Resource Resource
	Healthy  bool
}

// Sync makes the manager run exactly the servers of want (by resource name):
// it starts missing ones, restarts one whose device list changed, stops the
// rest, and sets each one's health. It returns, per wanted resource name,
// the server's error (nil once registered with kubelet). Two wanted
// resources whose device IDs overlap (two lower devices whose names hash to
// one block) are both refused with an error naming both.
func (m *Manager) Sync(want []Want) map[string]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.servers == nil {
		m.servers = map[string]*managed{}
	}
	out := map[string]error{}
	owner := map[string]string{}
	clash := map[string]string{}
	for _, w := range want {
		for _, id := range w.Resource.Devices {
			if o, ok := owner[id]; ok && o != w.Resource.Name {
				clash[w.Resource.Name], clash[o] = o, w.Resource.Name
			}
			owner[id] = w.Resource.Name
		}
	}
	keep := map[string]bool{}
	for _, w := range want {
		name := w.Resource.Name
		if other, ok := clash[name]; ok {
			out[name] = fmt.Errorf("device plugin resource %s not offered: its device IDs overlap those of %s (their lower device names hash to one block of tap indexes): rename one lower device (FastPathNetwork spec.bridge)", name, other)
			continue
		}
		keep[name] = true
		cur := m.servers[name]
		if cur != nil && !slices.Equal(cur.devices, w.Resource.Devices) {
			cur.srv.Stop()
			cur = nil
		}
		if cur == nil {
			cur = &managed{srv: NewServer(w.Resource, m.Dir, m.KubeletSocket, m.WatchInterval, m.Log), devices: slices.Clone(w.Resource.Devices)}
			m.servers[name] = cur
			if err := cur.srv.Start(); err != nil {
				m.Log.Error(err, "Device plugin not registered yet; retrying", "resource", name)
			}
		}
		cur.srv.SetHealthy(w.Healthy)
		out[name] = cur.srv.Err()
	}
	for name, cur := range m.servers {
		if !keep[name] {
			cur.srv.Stop()
			delete(m.servers, name)
			m.Log.Info("Stopped device plugin", "resource", name)
		}
	}
	return out
}

// Stop stops every server.
func (m *Manager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, cur := range m.servers {
		cur.srv.Stop()
		delete(m.servers, name)
	}
}

// Running returns the names of the resources being served, sorted.
func (m *Manager) Running() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name := range m.servers {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// IsMacvtapResource reports whether name is a resource of MacvtapResource.
func IsMacvtapResource(name string) bool {
	return strings.HasPrefix(name, fastpathv1alpha1.MacvtapResourceDomain+"/")
}
