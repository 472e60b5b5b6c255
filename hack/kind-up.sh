#!/usr/bin/env bash
# Create a kind cluster that runs Fastpath for real, for the e2e suite with
# KUBECONFIG set (make e2e): kind, Open vSwitch on the nodes, Multus (thick),
# KubeVirt with the VSOCK and Sidecar feature gates, and Fastpath's chart with
# images built from this checkout.
#
#   hack/kind-up.sh            create (or reuse) the cluster and install everything
#   hack/kind-up.sh --down     delete the cluster
#
# Afterwards: export KUBECONFIG=_out/kind/kubeconfig PATH=$PWD/_out/kind/bin:$PATH
#             (cd test && go test ./e2e/... -ginkgo.v)
#
# Host requirements (a GitHub Ubuntu runner has them after `modprobe`): Docker,
# the kernel modules vhost_vsock (KubeVirt's VSOCK), vhost_net and tun (virtio-net),
# openvswitch (OVS datapath_type system), and /dev/kvm for speed (without it
# KubeVirt is configured to use software emulation, which is slow but works).
# Pinned versions below; bump them together with kubevirt.io/api in go.mod.
set -euo pipefail

KIND_VERSION=${KIND_VERSION:-v0.30.0}
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.34.0}
MULTUS_VERSION=${MULTUS_VERSION:-v4.2.2}
KUBEVIRT_VERSION=${KUBEVIRT_VERSION:-v1.6.0}
HELM_VERSION=${HELM_VERSION:-v3.19.0}
CLUSTER=${CLUSTER:-fastpath}
IMAGE_REGISTRY=${IMAGE_REGISTRY:-ghcr.io/fastpath-io}
IMAGE_TAG=${IMAGE_TAG:-e2e}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/_out/kind"
BIN="$OUT/bin"
export KUBECONFIG="$OUT/kubeconfig"
mkdir -p "$BIN"
export PATH="$BIN:$PATH"

log() { printf '\n==> %s\n' "$*"; }
die() { printf 'kind-up: %s\n' "$*" >&2; exit 1; }

arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64|arm64) echo arm64 ;;
    *) die "unsupported architecture $(uname -m)" ;;
  esac
}

# Checksums of downloads: hack/checksums.txt pins "<sha256>  <url>" lines and
# wins; else the sha256 file the project publishes next to the artifact (SUMURL)
# is used, which catches a corrupted or truncated download but not a
# compromised origin. A download with neither is refused unless
# FASTPATH_ALLOW_UNPINNED=1 (then it is used with a warning naming it).
CHECKSUMS="$ROOT/hack/checksums.txt"

# verify FILE URL [SUMURL]: check FILE's sha256, or die naming URL.
verify() {
  local want got
  want=$(awk -v u="$2" '!/^#/ && $2 == u {print $1}' "$CHECKSUMS" 2>/dev/null | head -n1)
  if [ -z "$want" ] && [ -n "${3:-}" ]; then
    want=$(curl -fsSL --retry 3 "$3" | awk '{print $1; exit}') || die "failed to download the checksum $3"
  fi
  if [ -z "$want" ]; then
    [ "${FASTPATH_ALLOW_UNPINNED:-0}" = 1 ] || die "no checksum for $2: add '<sha256>  $2' to hack/checksums.txt (or set FASTPATH_ALLOW_UNPINNED=1)"
    log "WARNING: using $2 UNVERIFIED (FASTPATH_ALLOW_UNPINNED=1)"
    return 0
  fi
  got=$(sha256sum "$1" | awk '{print $1}')
  [ "$got" = "$want" ] || die "checksum mismatch for $2: got $got, want $want"
}

# fetch URL DEST [SUMURL]: download once, verify, fail loudly.
fetch() {
  [ -s "$2" ] && return 0
  curl -fsSL --retry 3 -o "$2.tmp" "$1" || die "failed to download $1"
  verify "$2.tmp" "$1" "${3:-}"
  mv "$2.tmp" "$2"
}

# apply_url URL: kubectl apply a downloaded, verified manifest.
apply_url() {
  local f; f="$OUT/$(basename "$1")"
  rm -f "$f"
  fetch "$1" "$f"
  kubectl apply -f "$f"
}

install_tools() {
  local a; a=$(arch)
  command -v docker >/dev/null || die "docker is required"
  fetch "https://kind.sigs.k8s.io/dl/${KIND_VERSION}/kind-linux-${a}" "$BIN/kind" "https://kind.sigs.k8s.io/dl/${KIND_VERSION}/kind-linux-${a}.sha256sum"
  chmod +x "$BIN/kind"
  fetch "https://github.com/kubevirt/kubevirt/releases/download/${KUBEVIRT_VERSION}/virtctl-${KUBEVIRT_VERSION}-linux-${a}" "$BIN/virtctl"
  chmod +x "$BIN/virtctl"
  if ! command -v helm >/dev/null; then
    fetch "https://get.helm.sh/helm-${HELM_VERSION}-linux-${a}.tar.gz" "$OUT/helm.tgz" "https://get.helm.sh/helm-${HELM_VERSION}-linux-${a}.tar.gz.sha256sum"
    tar -xzf "$OUT/helm.tgz" -C "$OUT" "linux-${a}/helm"
    mv "$OUT/linux-${a}/helm" "$BIN/helm"
  fi
  if ! command -v kubectl >/dev/null; then
    if [ -x "$ROOT/bin/kubectl" ]; then
      ln -sf "$ROOT/bin/kubectl" "$BIN/kubectl"
    else
      fetch "https://dl.k8s.io/release/v1.34.1/bin/linux/${a}/kubectl" "$BIN/kubectl" "https://dl.k8s.io/release/v1.34.1/bin/linux/${a}/kubectl.sha256"
      chmod +x "$BIN/kubectl"
    fi
  fi
}

check_host() {
  for m in vhost_vsock vhost_net tun openvswitch; do
    if ! lsmod | grep -q "^${m} " && [ ! -d "/sys/module/${m}" ]; then
      die "kernel module ${m} is not loaded: run 'sudo modprobe ${m}'"
    fi
  done
  [ -e /dev/vhost-vsock ] || die "/dev/vhost-vsock is missing (modprobe vhost_vsock)"
}

create_cluster() {
  if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    log "Reusing kind cluster $CLUSTER"
    kind export kubeconfig --name "$CLUSTER" --kubeconfig "$KUBECONFIG"
    return
  fi
  log "Creating kind cluster $CLUSTER ($KIND_NODE_IMAGE): one control plane, one worker"
  # The worker gets the host's vsock, vhost and tun devices and kvm when there
  # is one: virt-handler's device plugins hand them to virt-launcher pods.
  local kvm_mount=""
  if [ -e /dev/kvm ]; then
    kvm_mount="  - {hostPath: /dev/kvm, containerPath: /dev/kvm}"
  fi
  cat >"$OUT/kind.yaml" <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
- role: worker
  extraMounts:
  - {hostPath: /dev/vhost-vsock, containerPath: /dev/vhost-vsock}
  - {hostPath: /dev/vhost-net, containerPath: /dev/vhost-net}
  - {hostPath: /dev/net/tun, containerPath: /dev/net/tun}
  - {hostPath: /lib/modules, containerPath: /lib/modules, readOnly: true}
${kvm_mount}
EOF
  kind create cluster --name "$CLUSTER" --image "$KIND_NODE_IMAGE" --config "$OUT/kind.yaml" --kubeconfig "$KUBECONFIG" --wait 5m
}

install_ovs() {
  log "Installing Open vSwitch on every node (kernel datapath of the host)"
  local node
  for node in $(kind get nodes --name "$CLUSTER"); do
    docker exec "$node" bash -c '
      set -e
      if ! command -v ovs-vsctl >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openvswitch-switch >/dev/null
      fi
      /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >/dev/null
      ovs-vsctl --timeout=10 show >/dev/null'
  done
}

install_multus() {
  log "Installing Multus ${MULTUS_VERSION} (thick plugin)"
  apply_url "https://raw.githubusercontent.com/k8snetworkplumbingwg/multus-cni/${MULTUS_VERSION}/deployments/multus-daemonset-thick.yml"
  kubectl -n kube-system rollout status daemonset/kube-multus-ds --timeout=5m
}

install_kubevirt() {
  log "Installing KubeVirt ${KUBEVIRT_VERSION} with the VSOCK and Sidecar feature gates"
  apply_url "https://github.com/kubevirt/kubevirt/releases/download/${KUBEVIRT_VERSION}/kubevirt-operator.yaml"
  apply_url "https://github.com/kubevirt/kubevirt/releases/download/${KUBEVIRT_VERSION}/kubevirt-cr.yaml"
  local emulation=false
  [ -e /dev/kvm ] || emulation=true
  kubectl -n kubevirt patch kubevirt kubevirt --type=merge -p "{\"spec\":{\"configuration\":{
    \"developerConfiguration\":{\"useEmulation\":${emulation},\"featureGates\":[\"VSOCK\",\"Sidecar\"]}}}}"
  kubectl -n kubevirt wait kubevirt/kubevirt --for=condition=Available --timeout=15m
}

install_fastpath() {
  log "Building Fastpath images ${IMAGE_REGISTRY}/fastpath-*:${IMAGE_TAG} and loading them into kind"
  local t
  for t in operator agent bench domain-hook; do
    docker build --target "$t" -t "${IMAGE_REGISTRY}/fastpath-${t}:${IMAGE_TAG}" "$ROOT"
    kind load docker-image --name "$CLUSTER" "${IMAGE_REGISTRY}/fastpath-${t}:${IMAGE_TAG}"
  done
  log "Installing the Fastpath chart"
  # kind's pod network (kindnet) is 10.244.0.0/16; the e2e attachment uses 10.249.0.0/24.
  helm upgrade --install fastpath "$ROOT/charts/fastpath" --namespace fastpath-system --create-namespace \
    --set image.registry="$IMAGE_REGISTRY" --set image.tag="$IMAGE_TAG" --set image.pullPolicy=IfNotPresent \
    --set operator.podNetworkCIDRs=10.244.0.0/16 --set agent.ovs.datapathType=system \
    --wait --timeout 5m
  kubectl wait fastpathnodes --all --for=condition=Ready --timeout=3m
}

if [ "${1:-}" = "--down" ]; then
  install_tools
  kind delete cluster --name "$CLUSTER"
  rm -f "$KUBECONFIG"
  exit 0
fi

install_tools
check_host
create_cluster
install_ovs
install_multus
install_kubevirt
install_fastpath
log "Ready. Run the e2e suite against it with:"
echo "  export KUBECONFIG=$KUBECONFIG PATH=$BIN:\$PATH"
echo "  (cd test && go test ./e2e/... -ginkgo.v)"
