// Package images builds Fastpath's container images without a Docker daemon
// (`make images`, issue 14): OCI images assembled with go-containerregistry
// from files on this machine — static Go binaries, Kubernetes' pause built
// with gcc, the vhost-device-vsock that `make setup` builds with cargo, and
// the contents of Debian packages (`apt-get download` + `dpkg -x`) — and
// written as OCI image-layout archives `_out/images/<name>.tar` that
// `ctr images import` reads.
//
// One Target per Dockerfile stage (operator, agent, bench, domain-hook) plus
// the pause image the kubelet's sandboxes use. The Dockerfile is the one
// recipe: Targets reads from it what each image puts where (binaries, paths,
// user, entrypoint, the Debian base's packages), and what the builder cannot
// follow is an error (dockerfile.go).
// Every image carries its platform (linux/amd64) in its config and in the
// archive's index, because containerd drops images without one on import.
//
// Nothing is pulled from a registry: the bases are assembled here from Debian
// packages (ca-certificates, a nonroot user 65532, /tmp), the way distroless
// assembles its own. Import puts the archives into a given containerd.
package images
