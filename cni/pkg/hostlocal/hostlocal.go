package hostlocal

import (
	"errors"
	"fmt"
	"net"
	"strings"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/allocator"
)

// Type is the IPAM "type" this package serves.
const Type = "host-local"

// Args identify the attachment an operation is for, as the binary reads
// them from CNI_CONTAINERID, CNI_IFNAME and CNI_ARGS (whose IP= requests a
// specific address).
type Args struct {
	ContainerID, IfName, CNIArgs string
}

// Add allocates an address from each range set of the IPAM configuration
// in stdin (a network configuration with an "ipam" object) for args, as
// host-local's ADD does: requested addresses (CNI_ARGS IP=, runtimeConfig
// ips, args) first, otherwise round-robin from the last reserved one. An
// attachment that already holds an address of a range set is refused
// ("duplicate allocation is not allowed"), as by the binary. On any error
// what this call allocated is released. The result has the addresses, their
// gateways and the configuration's routes, in CNI version
// current.ImplementedSpecVersion.
func Add(args Args, stdin []byte) (*current.Result, error) {
	conf, _, err := allocator.LoadIPAMConfig(stdin, args.CNIArgs)
	if err != nil {
		return nil, err
	}
	if conf.ResolvConf != "" {
		// netconf.IPAMKeys does not let it through; the binary would read it.
		return nil, fmt.Errorf("ipam.resolvConf is not supported by the in-process host-local")
	}
	store, err := NewStore(conf.Name, conf.DataDir)
	if err != nil {
		return nil, err
	}
	defer store.Close()

	result := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	var allocs []*allocator.IPAllocator
	releaseAll := func() {
		for _, a := range allocs {
			_ = a.Release(args.ContainerID, args.IfName)
		}
	}
	requested := map[string]net.IP{}
	for _, ip := range conf.IPArgs {
		requested[ip.String()] = ip
	}
	for idx, rangeset := range conf.Ranges {
		a := allocator.NewIPAllocator(&rangeset, store, idx)
		var requestedIP net.IP
		for k, ip := range requested {
			if rangeset.Contains(ip) {
				requestedIP = ip
				delete(requested, k)
				break
			}
		}
		ipConf, err := a.Get(args.ContainerID, args.IfName, requestedIP)
		if err != nil {
			releaseAll()
			return nil, fmt.Errorf("failed to allocate for range %d: %v", idx, err)
		}
		allocs = append(allocs, a)
		result.IPs = append(result.IPs, ipConf)
	}
	if len(requested) != 0 {
		releaseAll()
		missing := make([]string, 0, len(requested))
		for _, ip := range requested {
			missing = append(missing, ip.String())
		}
		return nil, errors.New("failed to allocate all requested IPs: " + strings.Join(missing, " "))
	}
	result.Routes = conf.Routes
	return result, nil
}

// Del releases every address args' attachment holds in the network of the
// IPAM configuration in stdin, as host-local's DEL does: idempotent, an
// attachment without addresses is success.
func Del(args Args, stdin []byte) error {
	conf, _, err := allocator.LoadIPAMConfig(stdin, args.CNIArgs)
	if err != nil {
		return err
	}
	store, err := NewStore(conf.Name, conf.DataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	var errs []string
	for idx, rangeset := range conf.Ranges {
		if err := allocator.NewIPAllocator(&rangeset, store, idx).Release(args.ContainerID, args.IfName); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if errs != nil {
		return errors.New(strings.Join(errs, ";"))
	}
	return nil
}

// Check reports an error when args' attachment holds no address in the
// network of the IPAM configuration in stdin, as host-local's CHECK does.
func Check(args Args, stdin []byte) error {
	conf, _, err := allocator.LoadIPAMConfig(stdin, args.CNIArgs)
	if err != nil {
		return err
	}
	store, err := NewStore(conf.Name, conf.DataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	if !store.FindByID(args.ContainerID, args.IfName) {
		return fmt.Errorf("host-local: Failed to find address added by container %v", args.ContainerID)
	}
	return nil
}
