package netconf

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// Args are the CNI_ARGS keys the plugin reads ("K1=V1;K2=V2"); the K8S_*
// keys are what kubelet and Multus pass, MAC the container MAC some runtimes
// pass. IgnoreUnknown=1 lets other keys through.
type Args struct {
	types.CommonArgs
	MAC                        types.UnmarshallableString
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive,stylecheck // CNI_ARGS key
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive,stylecheck // CNI_ARGS key
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive,stylecheck // CNI_ARGS key
	K8S_POD_UID                types.UnmarshallableString //nolint:revive,stylecheck // CNI_ARGS key
}

// ParseArgs parses CNI_ARGS raw. An unparsable value or an unknown key
// without IgnoreUnknown=1 is a *types.Error with code
// ErrInvalidEnvironmentVariables (4): "failed to parse CNI_ARGS: <why>".
func ParseArgs(raw string) (*Args, error) {
	args := &Args{}
	if err := types.LoadArgs(raw, args); err != nil {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("failed to parse CNI_ARGS: %v", err), "")
	}
	return args, nil
}

// PodNamespace returns K8S_POD_NAMESPACE ("" when absent).
func (a *Args) PodNamespace() string { return string(a.K8S_POD_NAMESPACE) }

// Pod returns "<namespace>/<name>" from K8S_POD_NAMESPACE and K8S_POD_NAME
// when the runtime passed the name, else "".
func (a *Args) Pod() string {
	if a.K8S_POD_NAME == "" {
		return ""
	}
	return string(a.K8S_POD_NAMESPACE) + "/" + string(a.K8S_POD_NAME)
}

// ContainerMAC returns the MAC address the container interface must get,
// in net.HardwareAddr.String form: runtimeConfig.mac (Multus "mac"
// capability) first, else CNI_ARGS MAC=, else "" (kernel-assigned). A bad
// address is a *types.Error with code ErrInvalidNetworkConfig (7) naming
// its source (ParseMAC).
func (c *NetConf) ContainerMAC(args *Args) (string, error) {
	if c.RuntimeConfig != nil && c.RuntimeConfig.MAC != "" {
		m, err := ParseMAC("runtimeConfig.mac", c.RuntimeConfig.MAC)
		if err != nil {
			return "", err
		}
		return m.String(), nil
	}
	if args.MAC != "" {
		m, err := ParseMAC("CNI_ARGS MAC", string(args.MAC))
		if err != nil {
			return "", err
		}
		return m.String(), nil
	}
	return "", nil
}
