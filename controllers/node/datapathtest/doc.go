// Package datapathtest holds the node agent's root tests: the real reconciler
// with the real bridge manager (netlink and OVSDB, OVS with the userspace
// datapath) against the embedded kube-apiserver. They create bridges with
// unique names and remove them at cleanup. Run them as root (`make test`);
// they fail, not skip, otherwise.
package datapathtest
