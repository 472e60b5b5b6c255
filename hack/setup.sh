#!/usr/bin/env bash
# hack/setup.sh — install everything `make test`, `make demo` and `make bench` need on a
# Debian bookworm machine, as root. Idempotent: a second run with everything present does
# nothing but check (a few seconds).
#
#   - apt packages (netperf comes from Debian's non-free component, enabled here)
#   - tools built from the pinned tools module hack/tools into bin/: controller-gen,
#     kube-apiserver and kubectl (k8s.io/kubernetes v1.34.1, every staging module
#     replaced by its v0.34.1 release), helm (chart lint/render tests); bin/ is what
#     KUBEBUILDER_ASSETS points at
#   - the real single-node cluster's parts (make cluster): kubelet, kube-controller-manager,
#     kube-scheduler and kube-proxy (same k8s.io/kubernetes), crictl (go install) and
#     Multus's thin plugin (module hack/multus) into bin/; containerd and runc from Debian
#   - etcd from Debian's etcd-server, linked into bin/
#
# Parts, so that each make target builds only what it runs (hack/setup.sh PART...; no
# argument: all of them but kubevirt, as `make setup` and `make test`):
#   core     apt packages of the node datapaths and the benchmark; etcd, kube-apiserver,
#            kubectl (the embedded control plane of make demo, envtest, the e2e suite)
#   tools    controller-gen and helm (make generate, manifests, verify; chart tests)
#   cluster  containerd, runc, gcc; kubelet, kube-controller-manager, kube-scheduler,
#            kube-proxy, crictl, Multus (make cluster, make images)
#   guests   QEMU, libvirt, the guest image (make demo GUESTS=qemu, the real-guest tests)
#   vsock    vhost-device-vsock with our patches (real guests, the agent image)
#   kubevirt KubeVirt from source (module hack/tools/kubevirt) into bin/kubevirt/<version>/:
#            virt-operator, -api, -controller, -handler, -launcher and the launcher's
#            helpers, container-disk, and the operator manifest rendered for
#            localhost/kubevirt/*:<version> (docs/kubevirt.md). Only when named: not part
#            of `make setup` / `make test` (tens of minutes cold on two cores)
set -euo pipefail

ALL_PARTS="core tools cluster guests vsock"
KNOWN_PARTS="${ALL_PARTS} kubevirt"
PARTS=" ${*:-${ALL_PARTS}} "
for p in ${PARTS}; do
  [[ " ${KNOWN_PARTS} " == *" ${p} "* ]] || { printf 'setup: unknown part %s (parts: %s)\n' "$p" "${KNOWN_PARTS}" >&2; exit 2; }
done
# want PART: is PART asked for?
want() { [[ "${PARTS}" == *" $1 "* ]]; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/bin"
mkdir -p "${BIN}"

log() { printf 'setup: %s\n' "$*" >&2; }

if [[ "$(id -u)" != 0 ]]; then
  log "must run as root (apt-get, network namespaces, Open vSwitch)"
  exit 1
fi

APT_PACKAGES=(
  openvswitch-switch netperf iperf3 etcd-server libvirt-clients containernetworking-plugins
  ethtool iproute2 nftables iputils-ping procps chromium kmod libxml2-utils openssh-client
)
# make images (e2e/localenv/images): gcc and libc6-dev compile Kubernetes' pause statically;
# the real single-node cluster (make cluster): its own containerd (never the system service) and runc
want cluster && APT_PACKAGES+=(gcc libc6-dev containerd runc)
# real guests (e2e/localenv/guests): QEMU under libvirt, and the guest image's inputs
# KubeVirt from source: virt-handler and virt-launcher are cgo (linux/kvm.h; libvirt 9.0),
# container-disk is C linked statically
want kubevirt && APT_PACKAGES+=(gcc libc6-dev pkg-config libvirt-dev patch)
want guests && APT_PACKAGES+=(qemu-system-x86 libvirt-daemon libvirt-daemon-driver-qemu busybox-static socat cpio gzip dropbear-bin)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  # netperf lives in Debian's non-free component.
  src=/etc/apt/sources.list.d/debian.sources
  if [[ -f "$src" ]] && ! grep -qE '^Components:.*non-free( |$)' "$src"; then
    log "enabling the non-free component in $src (netperf)"
    sed -i -E '/^Components:/{/non-free( |$)/!s/$/ non-free/}' "$src"
  elif [[ ! -f "$src" ]] && ! grep -rqsE 'non-free( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian bookworm main non-free" >/etc/apt/sources.list.d/fastpath-non-free.list
  fi
  log "installing apt packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts netserver, etcd, OVS and containerd as services on install; tests and
  # make cluster start their own.
  for svc in netperf etcd openvswitch-switch containerd; do
    if command -v systemctl >/dev/null 2>&1; then systemctl disable --now "$svc" >/dev/null 2>&1 || true; fi
  done
  pkill -x netserver 2>/dev/null || true
  pkill -x etcd 2>/dev/null || true
fi

# etcd: Debian's etcd-server (3.4) is what envtest drives.
if [[ ! -x "${BIN}/etcd" ]]; then
  ln -sf "$(command -v etcd || echo /usr/bin/etcd)" "${BIN}/etcd"
fi

# Go tools, pinned in hack/tools/go.mod.
TOOLS="${ROOT}/hack/tools"
K8S_VERSION="v1.34.1"
# build_tool name package [ldflags]: build package from hack/tools into bin/name. The
# stamp is the tool module's version and the ldflags, so adding a tool to go.mod does
# not rebuild the others.
build_tool() {
  local name=$1 pkg=$2 ldflags=${3:-}
  local stamp="${BIN}/.${name}.stamp"
  local want
  want="$(cd "${TOOLS}" && go list -f '{{.Module.Path}}@{{.Module.Version}}' "${pkg}") ${ldflags}"
  if [[ -x "${BIN}/${name}" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return 0
  fi
  log "building ${name} from ${pkg} (cold: minutes; cached after)"
  (cd "${TOOLS}" && CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${BIN}/${name}" "${pkg}")
  echo "$want" >"$stamp"
}

want tools && build_tool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen
VPKG=k8s.io/component-base/version
K8S_LDFLAGS="-s -w -X ${VPKG}.gitVersion=${K8S_VERSION} -X ${VPKG}.gitMajor=1 -X ${VPKG}.gitMinor=34 -X ${VPKG}.gitTreeState=clean"
build_tool kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${K8S_LDFLAGS}"
build_tool kubectl k8s.io/kubernetes/cmd/kubectl "${K8S_LDFLAGS}"
want tools && build_tool helm helm.sh/helm/v3/cmd/helm "-s -w -X helm.sh/helm/v3/internal/version.version=v3.19.0"

if want cluster; then
# The real single-node cluster (make cluster, e2e/localenv/cluster): the kubelet,
# kube-controller-manager, kube-scheduler and kube-proxy of the same k8s.io/kubernetes,
# crictl and Multus's thin plugin. Built one at a time: each is minutes cold on two cores.
build_tool kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "${K8S_LDFLAGS}"
build_tool kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "${K8S_LDFLAGS}"
build_tool kubelet k8s.io/kubernetes/cmd/kubelet "${K8S_LDFLAGS}"
build_tool kube-proxy k8s.io/kubernetes/cmd/kube-proxy "${K8S_LDFLAGS}"

# go_install name package version [ldflags]: `go install package@version` into bin/ (a
# module of its own, outside hack/tools, whose requirements would clash with
# k8s.io/kubernetes's).
go_install() {
  local name=$1 pkg=$2 version=$3 ldflags=${4:-}
  local stamp="${BIN}/.${name}.stamp"
  if [[ -x "${BIN}/${name}" && "$(cat "$stamp" 2>/dev/null)" == "${pkg}@${version} ${ldflags}" ]]; then
    return 0
  fi
  log "installing ${name} from ${pkg}@${version} (cold: a minute or two; cached after)"
  GOFLAGS= GOBIN="${BIN}" CGO_ENABLED=0 go install -trimpath -ldflags "${ldflags}" "${pkg}@${version}"
  echo "${pkg}@${version} ${ldflags}" >"$stamp"
}
# crictl: the module proxy serves cri-tools v1.34.0 and v1.37.0, nothing older.
go_install crictl sigs.k8s.io/cri-tools/cmd/crictl v1.34.0 "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=v1.34.0"
# The cluster's OCI registry (make cluster runs it; make cluster-install pushes Fastpath's
# images and chart there and installs from it, as a user installs from theirs):
# distribution's registry, the same release the harness's push tests serve
# (e2e/go.mod; cluster.RegistryVersion).
go_install registry github.com/distribution/distribution/v3/cmd/registry v3.0.0 "-s -w"

# Multus's thin plugin, pinned in the module hack/multus (its own requirements; `go
# install @version` fails there: the proxy refuses the module's version list). The
# cluster applies the NetworkAttachmentDefinition CRD and Multus's ClusterRole from the
# same module version's deployments/multus-daemonset.yml.
MULTUS_MOD=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
MULTUS_VERSION="$(cd "${ROOT}/hack/multus" && go list -m -f '{{.Version}}' "${MULTUS_MOD}")"
if [[ ! -x "${BIN}/multus" || "$(cat "${BIN}/.multus.stamp" 2>/dev/null)" != "${MULTUS_MOD}@${MULTUS_VERSION}" ]]; then
  log "building multus ${MULTUS_VERSION} (thin plugin; cold: a few minutes; cached after)"
  (cd "${ROOT}/hack/multus" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X ${MULTUS_MOD}/pkg/multus.version=${MULTUS_VERSION} -X ${MULTUS_MOD}/pkg/multus.releaseStatus=released" \
    -o "${BIN}/multus" "${MULTUS_MOD}/cmd/multus")
  echo "${MULTUS_MOD}@${MULTUS_VERSION}" >"${BIN}/.multus.stamp"
fi
fi

if want guests; then
# libvirtd (libvirt-daemon without libvirt-daemon-system) refuses to start unless its
# compiled-in QEMU user exists, even with user = "root" in qemu.conf; -system's postinst
# would create it. The real guests run QEMU as root (e2e/localenv/guests).
getent group kvm >/dev/null || groupadd --system kvm
getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
getent passwd libvirt-qemu >/dev/null ||
  useradd --system --no-create-home --home-dir /var/lib/libvirt --shell /usr/sbin/nologin -g libvirt-qemu -G kvm libvirt-qemu

# Real guests: the boot image (kernel from Debian's .deb + initramfs), rebuilt when its inputs change.
bash "${ROOT}/hack/guest-image.sh"
fi

# vhost-device-vsock, the vhost-user vsock backend of the real guests and of vsock mode
# Sibling: the crates.io release (pinned) with our patches of its sibling path
# (hack/vhost-device-vsock/*.patch, docs/vsock-sibling.md), unpacked and patched by
# hack/vhost-device-vsock/source.sh and built with the release's own Cargo.lock. The
# stamp names the patches, so a bin/ built before them, or with other ones, is rebuilt.
# Fastpath never passes it --forward-cid/--forward-listen (they would open AF_VSOCK on this host).
VHOST_VSOCK_VERSION=0.3.0
if want vsock; then
VHOST_VSOCK_STAMP="${VHOST_VSOCK_VERSION}+fastpath.$(cat "${ROOT}"/hack/vhost-device-vsock/*.patch | sha256sum | cut -c1-16)"
if [[ ! -x "${BIN}/vhost-device-vsock" || "$(cat "${BIN}/.vhost-device-vsock.stamp" 2>/dev/null)" != "${VHOST_VSOCK_STAMP}" ]]; then
  if ! command -v cargo >/dev/null 2>&1 && [[ -x "${HOME}/.cargo/bin/cargo" ]]; then
    export PATH="${HOME}/.cargo/bin:${PATH}"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    log "installing cargo from Debian (vhost-device-vsock needs it)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cargo >/dev/null
  fi
  if ! command -v patch >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patch >/dev/null
  fi
  log "building vhost-device-vsock ${VHOST_VSOCK_VERSION} with hack/vhost-device-vsock's patches (cold: a few minutes; cached after)"
  bash "${ROOT}/hack/vhost-device-vsock/source.sh" "${VHOST_VSOCK_VERSION}" "${ROOT}/_out/vhost-device-vsock/src"
  # --force: the same version from crates.io, unpatched, may be installed there already.
  cargo install --quiet --force --locked --path "${ROOT}/_out/vhost-device-vsock/src" \
    --target-dir "${ROOT}/_out/vhost-device-vsock/target" --root "${ROOT}/_out/cargo"
  install -m 0755 "${ROOT}/_out/cargo/bin/vhost-device-vsock" "${BIN}/vhost-device-vsock"
  echo "${VHOST_VSOCK_STAMP}" >"${BIN}/.vhost-device-vsock.stamp"
fi
fi

if want kubevirt; then
# KubeVirt, built from the module hack/tools/kubevirt pins (its go.mod: the version and the
# replaces copied from KubeVirt's own go.mod), the way KubeVirt's hack/build-go.sh does
# without Bazel: the version in kubevirt.io/client-go/version, cgo only where KubeVirt
# needs it. No "selinux" build tag: go-selinux then reports SELinux disabled, as it is on
# these hosts. The stamp is the module's go.mod and go.sum and this list, so a second run
# is a no-op and a version change rebuilds into a new bin/kubevirt/<version>/.
KV_MOD="${ROOT}/hack/tools/kubevirt"
KV_VERSION="$(cd "${KV_MOD}" && go list -m -f '{{.Version}}' kubevirt.io/kubevirt)"
KV_SRC="$(cd "${KV_MOD}" && go mod download -json kubevirt.io/kubevirt@"${KV_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
KV_OUT="${BIN}/kubevirt/${KV_VERSION}"
KV_NOCGO="virt-operator virt-api virt-controller virt-launcher-monitor virt-chroot virt-freezer virt-probe virt-tail sidecars virtctl"
KV_CGO="virt-handler virt-launcher"
KV_TOOLS="resource-generator manifest-templator"
KV_STAMP="${KV_VERSION} $(cat "${KV_MOD}/go.mod" "${KV_MOD}/go.sum" "${ROOT}"/hack/kubevirt/*.patch | sha256sum | cut -c1-16) ${KV_NOCGO} ${KV_CGO} ${KV_TOOLS} container-disk manifests"
if [[ "$(cat "${KV_OUT}/.stamp" 2>/dev/null)" != "${KV_STAMP}" ]]; then
  log "building KubeVirt ${KV_VERSION} into ${KV_OUT} (cold: tens of minutes on two cores; cached after)"
  rm -rf "${KV_OUT}.tmp" && mkdir -p "${KV_OUT}.tmp"
  KV_LDFLAGS="-s -w -X kubevirt.io/client-go/version.gitVersion=${KV_VERSION} -X kubevirt.io/client-go/version.gitTreeState=clean"
  KV_LDFLAGS+=" -X kubevirt.io/client-go/version.buildDate=$(date -u -d @0 +%Y-%m-%dT%H:%M:%SZ)"
  # Our patches (hack/kubevirt/*.patch, docs/kubevirt.md says why) go on a copy of the
  # module's source, which the build takes through a replace in a copy of the go.mod.
  KV_PATCHED="${ROOT}/_out/kubevirt-src/${KV_VERSION}"
  rm -rf "${KV_PATCHED}" && mkdir -p "$(dirname "${KV_PATCHED}")"
  cp -r "${KV_SRC}" "${KV_PATCHED}" && chmod -R u+w "${KV_PATCHED}"
  for p in "${ROOT}"/hack/kubevirt/*.patch; do
    patch -p1 --quiet --forward -d "${KV_PATCHED}" <"$p" || { log "patch $p does not apply to kubevirt.io/kubevirt ${KV_VERSION}"; exit 1; }
  done
  KV_SRC="${KV_PATCHED}"
  cp "${KV_MOD}/go.mod" "${KV_PATCHED}.mod" && cp "${KV_MOD}/go.sum" "${KV_PATCHED}.sum"
  echo "replace kubevirt.io/kubevirt => ${KV_PATCHED}" >>"${KV_PATCHED}.mod"
  kv_build() { # kv_build cgo package...: go build each package into KV_OUT.tmp/
    local cgo=$1; shift
    (cd "${KV_MOD}" && CGO_ENABLED="${cgo}" go build -modfile="${KV_PATCHED}.mod" -trimpath -ldflags "${KV_LDFLAGS}" -o "${KV_OUT}.tmp/" "$@")
  }
  # shellcheck disable=SC2046 # word splitting is the point
  kv_build 0 $(for c in ${KV_NOCGO}; do echo "kubevirt.io/kubevirt/cmd/$c"; done) \
    $(for t in ${KV_TOOLS}; do echo "kubevirt.io/kubevirt/tools/$t"; done)
  # shellcheck disable=SC2046
  kv_build 1 $(for c in ${KV_CGO}; do echo "kubevirt.io/kubevirt/cmd/$c"; done)
  mv "${KV_OUT}.tmp/sidecars" "${KV_OUT}.tmp/sidecar-shim"
  # container-disk: KubeVirt's Bazel cc_binary, linked statically (its image is scratch)
  gcc -static -O2 -o "${KV_OUT}.tmp/container-disk" "${KV_SRC}/cmd/container-disk-v2alpha/main.c"
  # The operator manifest, as KubeVirt's hack/build-manifests.sh renders it: includes
  # from the module's manifests/generated, then the variables, with our images.
  for m in kubevirt-operator kubevirt-cr; do
    "${KV_OUT}.tmp/manifest-templator" --process-files --generated-manifests-dir="${KV_SRC}/manifests/generated/" \
      --input-file="${KV_SRC}/manifests/release/${m}.yaml.in" >"${KV_OUT}.tmp/${m}.yaml.in"
    "${KV_OUT}.tmp/manifest-templator" --process-vars --namespace=kubevirt --cdi-namespace=cdi \
      --container-prefix=localhost/kubevirt --image-prefix= --container-tag="${KV_VERSION}" \
      --csv-version="${KV_VERSION#v}" --image-pull-policy=IfNotPresent --infra-replicas=1 --verbosity=2 \
      --feature-gates= --package-name=kubevirt-operator --kubevirt-logo-path="${KV_SRC}/assets/kubevirt_logo.png" \
      --input-file="${KV_OUT}.tmp/${m}.yaml.in" \
      | sed -e '${/^$/d;}' >"${KV_OUT}.tmp/${m}.yaml"
    rm "${KV_OUT}.tmp/${m}.yaml.in"
  done
  echo "${KV_STAMP}" >"${KV_OUT}.tmp/.stamp"
  rm -rf "${KV_OUT}" && mv "${KV_OUT}.tmp" "${KV_OUT}"
fi
fi

log "ok ($(echo ${PARTS})): $(ls "${BIN}" | tr '\n' ' ')"
