package attachment

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// DefaultRelayPortRange is the default host vsock port range of relay ports
// (--relay-port-range). vsock ports are a 32-bit space of their own (no
// clash with TCP/UDP); the range stays below 1<<16 only for readability.
var DefaultRelayPortRange = PortRange{First: 20000, Last: 29999}

// PortRange is an inclusive range of host vsock ports.
type PortRange struct {
	First, Last int64
}

// ParsePortRange parses "first-last" (inclusive, 1 <= first <= last <=
// 4294967294; 0xFFFFFFFF is VMADDR_PORT_ANY, linux/vm_sockets.h).
func ParsePortRange(s string) (PortRange, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return PortRange{}, fmt.Errorf("failed to parse port range %q: want first-last, e.g. 20000-29999", s)
	}
	first, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	last, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return PortRange{}, fmt.Errorf("failed to parse port range %q: %w", s, err)
	}
	r := PortRange{First: first, Last: last}
	if first < 1 || last > 4294967294 || first > last {
		return PortRange{}, fmt.Errorf("failed to parse port range %q: must satisfy 1 <= first <= last <= 4294967294", s)
	}
	return r, nil
}

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

func (r PortRange) contains(p int64) bool { return p >= r.First && p <= r.Last }

// errPortsExhausted: every port of the range is taken.
var errPortsExhausted = errors.New("no free relay port")

// errNamespacePorts: the owner's namespace holds its share of the range.
var errNamespacePorts = errors.New("namespace holds its share of relay ports")

// DefaultRelayPortsPerNamespace is how many relay ports the attachments of
// one namespace hold at most (--relay-ports-per-namespace): 256, a 39th of
// DefaultRelayPortRange, so that no tenant can take the range from the others.
const DefaultRelayPortsPerNamespace = 256

// portAllocator hands out relay ports, unique cluster-wide (so also per node)
// and stable: a service keeps its port for as long as its attachment lives.
//
// The truth is the attachments' status.vsockServices[].relayPort (the node
// agent reads it). The allocator adds an in-memory table of what this process
// assigned, because the cache may not show a status written a moment ago;
// after a restart the table is empty and the statuses in the cache seed it.
type portAllocator struct {
	mu     sync.Mutex
	rng    PortRange
	perNS  int // ports one namespace holds at most; 0: no cap
	byKey  map[string]int64
	byPort map[int64]string
}

func newPortAllocator(r PortRange, perNamespace int) *portAllocator {
	return &portAllocator{rng: r, perNS: perNamespace, byKey: map[string]int64{}, byPort: map[int64]string{}}
}

// heldByOthers counts the ports held in owner's namespace by its other
// owners, in this process's table and in claimed.
func (a *portAllocator) heldByOthers(owner string, claimed map[int64]string) int {
	ns, _, _ := strings.Cut(owner, "/")
	others := func(key string) bool { return strings.HasPrefix(key, ns+"/") && !strings.HasPrefix(key, owner+"/") }
	held := map[string]bool{}
	for key := range a.byKey {
		if others(key) {
			held[key] = true
		}
	}
	for _, key := range claimed {
		if others(key) {
			held[key] = true
		}
	}
	return len(held)
}

func portKey(owner, service string) string { return owner + "/" + service }

// assign returns a port for each service of owner ("namespace/name"). previous
// maps a service to the port in the owner's status; claimed maps a port to the
// key ("namespace/name/service") that claims it in the statuses in the cache
// (when two keys claim one port the caller keeps the smaller key). A service
// keeps, in this order: the port this process gave it, its previous port when
// that is in range and nobody else holds it, else the lowest free port. Ports
// of services the owner no longer declares are released. The error wraps
// errPortsExhausted, or errNamespacePorts when owner's namespace would hold
// more than its cap, and names the first service without a port; services
// assigned before it keep theirs.
func (a *portAllocator) assign(owner string, services []string, previous map[string]int64, claimed map[int64]string) (map[string]int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	want := map[string]bool{}
	for _, s := range services {
		want[portKey(owner, s)] = true
	}
	for key, port := range a.byKey {
		if strings.HasPrefix(key, owner+"/") && !want[key] {
			delete(a.byKey, key)
			delete(a.byPort, port)
		}
	}
	free := func(port int64, key string) bool {
		if k, ok := a.byPort[port]; ok && k != key {
			return false
		}
		k, ok := claimed[port]
		return !ok || k == key
	}
	out := map[string]int64{}
	next := a.rng.First
	others := a.heldByOthers(owner, claimed)
	for _, svc := range services {
		key := portKey(owner, svc)
		if a.perNS > 0 && others+len(out) >= a.perNS {
			for k, port := range a.byKey { // the services past the cap hold none
				if _, kept := out[strings.TrimPrefix(k, owner+"/")]; strings.HasPrefix(k, owner+"/") && !kept {
					delete(a.byKey, k)
					delete(a.byPort, port)
				}
			}
			ns, _, _ := strings.Cut(owner, "/")
			return out, fmt.Errorf("failed to allocate a relay port for service %s: namespace %s holds %d relay ports, its cap (--relay-ports-per-namespace): %w",
				svc, ns, others+len(out), errNamespacePorts)
		}
		if port, ok := a.byKey[key]; ok && a.rng.contains(port) {
			out[svc] = port
			continue
		}
		port, ok := previous[svc]
		if !ok || !a.rng.contains(port) || !free(port, key) {
			port = 0
			for ; next <= a.rng.Last; next++ {
				if free(next, key) {
					port = next
					break
				}
			}
			if port == 0 {
				return out, fmt.Errorf("failed to allocate a relay port for service %s in %s: %w", svc, a.rng, errPortsExhausted)
			}
		}
		if old, ok := a.byKey[key]; ok {
			delete(a.byPort, old)
		}
		a.byKey[key] = port
		a.byPort[port] = key
		out[svc] = port
	}
	return out, nil
}

// release forgets every port of owner ("namespace/name").
func (a *portAllocator) release(owner string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, port := range a.byKey {
		if strings.HasPrefix(key, owner+"/") {
			delete(a.byKey, key)
			delete(a.byPort, port)
		}
	}
}

// claimsFrom builds the claimed map of assign from (key, port) pairs: when
// several keys claim one port, the smallest key wins, so every process
// resolves a duplicate the same way.
func claimsFrom(pairs map[string]int64) map[int64]string {
	keys := make([]string, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[int64]string{}
	for _, k := range keys {
		if _, ok := out[pairs[k]]; !ok {
			out[pairs[k]] = k
		}
	}
	return out
}
