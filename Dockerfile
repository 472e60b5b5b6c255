# syntax=docker/dockerfile:1
# Fastpath images, one target per component (written and reviewed; the development
# machines have no Docker engine, so `make docker-build` runs only where one exists).
# This file is the one recipe: `make images` reads it and builds the same images
# without a daemon (e2e/localenv/images/dockerfile.go, docs/images.md), and refuses
# what it cannot follow rather than build something else.
#
#   docker build --target operator     -t fastpath-operator .
#   docker build --target agent        -t fastpath-agent .      # DaemonSet: agent (relay) + CNI binaries + vhost-device-vsock
#   docker build --target bench        -t fastpath-bench .      # benchmark runner Job (netperf, ssh)
#   docker build --target domain-hook  -t fastpath-domain-hook . # KubeVirt sidecar (onDefineDomain)
#   docker build --target vsock-backend -t fastpath-vsock-backend . # DaemonSet (OnDelete): vhost-device-vsock for vsock mode Sibling
#
# `make docker-build` builds all five (DOCKER_TARGETS); the release workflow
# (.github/workflows/release.yaml) builds them for linux/amd64 and linux/arm64 with
# buildx. `make images` also builds Kubernetes' pause image, the local cluster's
# sandbox: its recipe is Kubernetes' build/pause, not ours, and a cluster brings its
# own, so it has no target here.

ARG GO_VERSION=1.26
ARG KUBEVIRT_VERSION=v1.7.0
# vhost-device-vsock (rust-vmm, crates.io), the vhost-user vsock backend the agent runs
# for vsock mode Sibling (docs/vsock-sibling.md), patched; hack/setup.sh pins the same
# version and applies the same patches.
ARG VHOST_DEVICE_VSOCK_VERSION=0.3.0
# Base images. Pin each by digest for a release, e.g.
#   --build-arg CC_IMAGE=gcr.io/distroless/cc-debian12@sha256:<digest>
# (`crane digest <image>` or `docker buildx imagetools inspect <image>`). The
# defaults are tags: the development machines cannot reach a registry, and no
# authoritative digest for these tags could be checked from here, so none is
# written down unverified (docs/security.md, Supply chain).
ARG BUILD_IMAGE=golang:${GO_VERSION}-bookworm
ARG STATIC_NONROOT_IMAGE=gcr.io/distroless/static-debian12:nonroot
# The agent's base: distroless's image for C and Rust programs (glibc and libgcc_s among
# its libraries), since vhost-device-vsock is linked against libc.so.6 and libgcc_s.so.1.
ARG CC_IMAGE=gcr.io/distroless/cc-debian12
# Builds vhost-device-vsock: 1.95 is the rustc `make setup` built bin/ with, and bookworm
# links against glibc 2.36, the one cc-debian12 carries.
ARG RUST_IMAGE=rust:1.95-bookworm
ARG BENCH_BASE_IMAGE=debian:bookworm-slim
ARG SIDECAR_SHIM_IMAGE=quay.io/kubevirt/sidecar-shim:${KUBEVIRT_VERSION}

# The Go stage runs on the builder's own platform and cross-compiles for the image's
# (docker buildx build --platform linux/amd64,linux/arm64: BuildKit sets TARGETOS and
# TARGETARCH), so an arm64 image costs no emulated compiler; the Rust and Debian stages
# below run on the image's platform (under QEMU on another architecture).
FROM --platform=$BUILDPLATFORM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    set -eu; mkdir -p /out; export GOOS=${TARGETOS} GOARCH=${TARGETARCH}; \
    for b in fastpath-operator fastpath-agent fastpath-domain-hook fastpath-vsock-backend kubectl-fastpath; do \
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/$b ./cmd/$b; \
    done; \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/fastpath-bench ./bench/cmd/fastpath-bench; \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/fastpath ./cni/cmd/fastpath; \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/fastpath-ovs-plugin ./cni/cmd/fastpath-ovs-plugin

# The crates.io release with our patches of its sibling path, as hack/setup.sh builds it:
# hack/vhost-device-vsock/source.sh fetches the .crate through cargo, checks its sha256
# and applies hack/vhost-device-vsock/*.patch (docs/vsock-sibling.md). --locked builds
# with the crate's own Cargo.lock, so the dependencies are the ones published with
# the release, not whatever semver allows today.
FROM ${RUST_IMAGE} AS vhost-device-vsock
ARG VHOST_DEVICE_VSOCK_VERSION
COPY hack/vhost-device-vsock/ /src/hack/vhost-device-vsock/
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    bash /src/hack/vhost-device-vsock/source.sh ${VHOST_DEVICE_VSOCK_VERSION} /src/vhost-device-vsock \
 && cargo install --locked --path /src/vhost-device-vsock --root /cargo \
 && mkdir -p /out && cp /cargo/bin/vhost-device-vsock /out/vhost-device-vsock

FROM ${STATIC_NONROOT_IMAGE} AS operator
COPY --from=build /out/fastpath-operator /usr/local/bin/fastpath-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/fastpath-operator"]

# The agent runs on the host network, not privileged: NET_ADMIN only (bridges, netlink,
# AF_VSOCK for the relay), the OVSDB socket, and the host's /dev read-only (it stats
# vhost-net, vhost-vsock and net/tun). The CNI binaries (fastpath and
# fastpath-ovs-plugin) ship beside it; the chart's install-cni init container (this
# image, --install-cni, no capabilities) copies them to the host's /opt/cni/bin,
# which the long-running agent mounts read-only. Only agent.tuneSysctls needs
# agent.privileged (docs/security.md). vhost-device-vsock is the backend the agent runs per
# Sibling attachment (chart value agent.sibling.vhostDeviceVsock); it is dynamically
# linked (libc.so.6, libgcc_s.so.1), hence the cc base rather than static.
FROM ${CC_IMAGE} AS agent
COPY --from=build /out/fastpath-agent /usr/local/bin/fastpath-agent
COPY --from=build /out/fastpath /usr/local/bin/fastpath
COPY --from=build /out/fastpath-ovs-plugin /usr/local/bin/fastpath-ovs-plugin
COPY --from=vhost-device-vsock /out/vhost-device-vsock /usr/local/bin/vhost-device-vsock
ENTRYPOINT ["/usr/local/bin/fastpath-agent"]

# The runner needs netperf (Debian non-free) and an SSH client for VM mode. ssh exits
# with "No user exists for uid 65532" unless the user it runs as is in /etc/passwd,
# which debian:bookworm-slim lacks: add distroless's nonroot user.
FROM ${BENCH_BASE_IMAGE} AS bench
RUN sed -i -E '/^Components:/{/non-free( |$)/!s/$/ non-free/}' /etc/apt/sources.list.d/debian.sources \
 && apt-get update \
 && apt-get install -y --no-install-recommends netperf openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --home-dir /home/nonroot --create-home --shell /sbin/nologin nonroot
COPY --from=build /out/fastpath-bench /usr/local/bin/fastpath-bench
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/fastpath-bench"]

# KubeVirt's sidecar-shim calls the executable named onDefineDomain on $PATH.
FROM ${SIDECAR_SHIM_IMAGE} AS domain-hook
COPY --from=build /out/fastpath-domain-hook /usr/bin/onDefineDomain
ENTRYPOINT ["/sidecar-shim", "--version", "v1alpha3"]

# vsock mode Sibling's backend in a pod of its own, so that an agent rollout leaves the
# vhost-device-vsock processes and the guests' connections alone (docs/vsock-sibling.md).
# No USER: the chart runs the server as 65532:65532 with no capability and its init
# container (--prepare-socket-dir) as root with only CAP_CHOWN; the binary refuses to
# serve as root. vhost-device-vsock is dynamically linked, hence the cc base.
FROM ${CC_IMAGE} AS vsock-backend
COPY --from=build /out/fastpath-vsock-backend /usr/local/bin/fastpath-vsock-backend
COPY --from=vhost-device-vsock /out/vhost-device-vsock /usr/local/bin/vhost-device-vsock
ENTRYPOINT ["/usr/local/bin/fastpath-vsock-backend"]
