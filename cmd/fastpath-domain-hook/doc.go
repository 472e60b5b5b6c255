// Command fastpath-domain-hook is the KubeVirt onDefineDomain hook of Fastpath:
// installed as /usr/bin/onDefineDomain in a sidecar-shim image, it is run as
//
//	onDefineDomain --vmi <VMI JSON> --domain <domain XML>
//
// and prints the tuned domain XML on stdout; logs and errors go to stderr, and
// on an error nothing is printed on stdout and the exit status is non-zero.
// Invoked under its own name it takes the same flags, optionally after the
// word onDefineDomain. The logic is in internal/vm/domainhook.
package main
