// Package datapathtest holds the node agent's root tests: the real reconciler
// with the real bridge manager (netlink and OVSDB, OVS with the userspace
// datapath) against the embedded kube-apiserver. They create bridges with
// unique names and remove them at cleanup. Run them as root (`make test`);
// they fail, not skip, otherwise.
//
// Why a package of its own (test files only): Go builds one test binary per
// package. controllers/nodeagent's envtest suite uses a fake bridge manager and
// runs as any user; these tests need root and take the machine-wide Open
// vSwitch lock (internal/datapath/ovsrun). In one package, `go test
// ./controllers/nodeagent/` would need both.
package datapathtest
