// Command fastpath-images builds Fastpath's container images without a Docker
// daemon (`make images`; test/localenv/images) and imports them into a
// containerd (`make images-import CONTAINERD_ADDRESS=<socket>`).
//
//	fastpath-images build [--out _out/images] [IMAGE...]
//	fastpath-images import --address /run/containerd/containerd.sock [--out _out/images] [IMAGE...]
//
// IMAGE is pause, operator, agent, bench or domain-hook (all when none). It
// only parses flags and wires the package to stdout/stderr.
package main
