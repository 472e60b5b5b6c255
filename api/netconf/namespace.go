package netconf

// MaxNamespaceLen is the longest Kubernetes namespace name in bytes: a DNS
// label (RFC 1123), 63 characters.
const MaxNamespaceLen = 63

// validNamespace reports whether ns is a DNS label: 1-MaxNamespaceLen
// characters of [a-z0-9-], starting and ending with a letter or digit. A
// loop, not a regexp (see bridgeNameOK).
func validNamespace(ns string) bool {
	if len(ns) == 0 || len(ns) > MaxNamespaceLen || ns[0] == '-' || ns[len(ns)-1] == '-' {
		return false
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validateNamespace checks the "namespace" field when it is set.
func (c *NetConf) validateNamespace() error {
	if c.Namespace != "" && !validNamespace(c.Namespace) {
		return invalid("namespace %q is invalid: must be a Kubernetes namespace name, 1-%d characters of [a-z0-9-] starting and ending with a letter or digit",
			c.Namespace, MaxNamespaceLen)
	}
	return nil
}

// RequireNamespace refuses the ADD of a pod in namespace podNamespace (the
// CNI_ARGS key K8S_POD_NAMESPACE that kubelet passes through Multus; "" when
// absent) to the network of c unless c names that namespace: a netconf
// belongs to the namespace of the FastPathAttachment it was rendered for, and
// Multus without namespaceIsolation lets a pod of any namespace name any
// NetworkAttachmentDefinition. A netconf without "namespace" is refused too.
//
// The error is a *types.Error with code ErrInvalidNetworkConfig (7): the
// configuration is not valid for this pod, and retrying cannot change that
// (code 4, ErrInvalidEnvironmentVariables, is for the CNI_* variables the
// specification defines; K8S_POD_NAMESPACE is a Kubernetes convention inside
// CNI_ARGS). The message names both namespaces.
func (c *NetConf) RequireNamespace(podNamespace string) error {
	switch {
	case c.Namespace == "":
		return invalid("namespace is required: network %q names no namespace, so no pod may be added to it "+
			"(the operator renders the FastPathAttachment's namespace into its NetworkAttachmentDefinition)", c.Name)
	case podNamespace == "":
		return invalid("network %q belongs to namespace %q but CNI_ARGS has no K8S_POD_NAMESPACE: refused to add a pod of unknown namespace",
			c.Name, c.Namespace)
	case podNamespace != c.Namespace:
		return invalid("network %q belongs to namespace %q: refused to add a pod of namespace %q (CNI_ARGS K8S_POD_NAMESPACE); "+
			"a pod may use only the networks of its own namespace", c.Name, c.Namespace, podNamespace)
	}
	return nil
}
