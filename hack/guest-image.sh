#!/usr/bin/env bash
# hack/guest-image.sh — build the real guests' boot image into bin/guest/ (called by setup.sh).
#
#   bin/guest/vmlinuz        Debian's cloud kernel, taken from its .deb (never installed on the host)
#   bin/guest/initramfs.gz   busybox-static, the virtio/vsock/console/block/isofs modules in dependency
#                            order, and ethtool, netperf/netserver, socat, iputils ping, dropbear with
#                            their libraries, plus /init (hack/guest/init) that reports from inside
#                            the guest
#   bin/guest/stamp          hash of every input; the image is rebuilt only when it changes
#
# Inputs: this script, hack/guest/*, the kernel package the cloud meta-package points at
# (GUEST_KERNEL_PACKAGE overrides), and the installed versions of the userland packages.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/guest"
CACHE="${OUT}/cache"
mkdir -p "${OUT}" "${CACHE}"

log() { printf 'guest-image: %s\n' "$*" >&2; }

# Userland binaries copied into the image, with the Debian package each comes from.
USERLAND=(
  "/bin/busybox:busybox-static"
  "/usr/sbin/ethtool:ethtool"
  "/usr/bin/netperf:netperf"
  "/usr/bin/netserver:netperf"
  "/usr/bin/socat:socat"
  "/usr/bin/ping:iputils-ping"
  "/usr/sbin/dropbear:dropbear-bin"
  "/usr/bin/dropbearkey:dropbear-bin"
)
# Modules the guest loads (with their dependencies, resolved by modprobe --show-depends).
# virtio_blk and isofs read the NoCloud disk KubeVirt attaches (an ISO 9660 image labelled
# cidata) for the SSH keys of a VM's accessCredentials.
MODULES=(virtio_pci virtio_net vmw_vsock_virtio_transport virtio_console virtio_blk isofs)

kernel_pkg="${GUEST_KERNEL_PACKAGE:-}"
if [[ -z "$kernel_pkg" ]]; then
  # The image package the cloud meta-package depends on today, e.g. linux-image-6.1.0-56-cloud-amd64.
  signed="$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
  if [[ -z "$signed" ]]; then
    apt-get update -qq
    signed="$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
  fi
  [[ -n "$signed" ]] || { log "cannot resolve the cloud kernel package (apt-cache depends linux-image-cloud-amd64)"; exit 1; }
  kernel_pkg="${signed}-unsigned"
fi
kernel_ver="$(apt-cache policy "$kernel_pkg" | awk '/Candidate:/ {print $2}')"
if [[ -z "$kernel_ver" || "$kernel_ver" == "(none)" ]]; then
  apt-get update -qq
  kernel_ver="$(apt-cache policy "$kernel_pkg" | awk '/Candidate:/ {print $2}')"
fi

# qemu-guest-agent, taken from its .deb (installed on the host, its service would start there):
# a KubeVirt VM reports its interfaces' names and addresses into the VMI's status through it.
qga_ver="$(apt-cache policy qemu-guest-agent | awk '/Candidate:/ {print $2}')"
[[ -n "$qga_ver" && "$qga_ver" != "(none)" ]] || { log "cannot resolve qemu-guest-agent (apt-cache policy)"; exit 1; }

inputs() {
  (cd "${ROOT}" && sha256sum hack/guest-image.sh hack/guest/*)
  echo "kernel ${kernel_pkg} ${kernel_ver}"
  echo "qemu-guest-agent ${qga_ver}"
  for entry in "${USERLAND[@]}"; do
    dpkg-query -W -f='${Package} ${Version}\n' "${entry#*:}"
  done
}
want="$(inputs | sha256sum | cut -c1-32)"
if [[ -f "${OUT}/stamp" && "$(cat "${OUT}/stamp")" == "$want" && -f "${OUT}/vmlinuz" && -f "${OUT}/initramfs.gz" ]]; then
  exit 0
fi
log "building the guest image: ${kernel_pkg} ${kernel_ver}, busybox, ethtool, netperf, socat, ping, dropbear, qemu-guest-agent ${qga_ver}"

deb="${CACHE}/${kernel_pkg}_${kernel_ver//:/%3a}_amd64.deb"
if [[ ! -f "$deb" ]]; then
  rm -f "${CACHE}"/*.deb
  (cd "${CACHE}" && apt-get download "${kernel_pkg}=${kernel_ver}" 2>&1 | grep -v 'unsandboxed' >&2 || true)
  deb="$(ls "${CACHE}"/"${kernel_pkg}"_*.deb 2>/dev/null | head -1)"
  [[ -f "$deb" ]] || { log "failed to download ${kernel_pkg}=${kernel_ver}"; exit 1; }
fi

qga_deb="${CACHE}/qga/qemu-guest-agent_${qga_ver//:/%3a}_amd64.deb"
if [[ ! -f "$qga_deb" ]]; then
  rm -rf "${CACHE}/qga" && mkdir -p "${CACHE}/qga"
  (cd "${CACHE}/qga" && apt-get download "qemu-guest-agent=${qga_ver}" 2>&1 | grep -v 'unsandboxed' >&2 || true)
  qga_deb="$(ls "${CACHE}"/qga/qemu-guest-agent_*.deb 2>/dev/null | head -1)"
  [[ -f "$qga_deb" ]] || { log "failed to download qemu-guest-agent=${qga_ver}"; exit 1; }
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
dpkg -x "$deb" "${work}/k"
dpkg -x "$qga_deb" "${work}/qga"
kver="$(ls "${work}/k/lib/modules")"
depmod -b "${work}/k" "$kver"

rootfs="${work}/rootfs"
mkdir -p "${rootfs}"/{bin,sbin,etc,proc,sys,dev,tmp,run,lib/modules,usr/bin,usr/sbin}

# Modules in load order, without duplicates.
: >"${rootfs}/etc/modules"
for m in "${MODULES[@]}"; do
  modprobe -d "${work}/k" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++' | while read -r ko; do
  name="$(basename "$ko")"
  case "$name" in
    *.ko.xz) xz -dc "$ko" >"${rootfs}/lib/modules/${name%.xz}"; name="${name%.xz}" ;;
    *.ko.zst) zstd -qdc "$ko" >"${rootfs}/lib/modules/${name%.zst}"; name="${name%.zst}" ;;
    *) cp "$ko" "${rootfs}/lib/modules/${name}" ;;
  esac
  echo "$name" >>"${rootfs}/etc/modules"
done

# Binaries and the shared libraries they load.
# copy_with_libs PATH [FROM]: PATH into the image (taken from FROM, default PATH), and its libraries.
copy_with_libs() {
  local dst="${rootfs}$1" src=${2:-$1}
  mkdir -p "$(dirname "$dst")"
  cp -L "$src" "$dst"
  { ldd "$src" 2>/dev/null || true; } | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | while read -r lib; do
    mkdir -p "${rootfs}$(dirname "$lib")"
    cp -Ln "$lib" "${rootfs}${lib}" 2>/dev/null || true
  done
}
for entry in "${USERLAND[@]}"; do
  copy_with_libs "${entry%%:*}"
done
copy_with_libs /usr/sbin/qemu-ga "${work}/qga/usr/sbin/qemu-ga"
# ld.so where the binaries expect it (/lib64/ld-linux-x86-64.so.2).
if [[ -e /lib64/ld-linux-x86-64.so.2 ]]; then
  mkdir -p "${rootfs}/lib64"
  cp -L /lib64/ld-linux-x86-64.so.2 "${rootfs}/lib64/"
fi

install -m 0755 "${ROOT}/hack/guest/init" "${rootfs}/init"
install -m 0755 "${ROOT}/hack/guest/udhcpc.script" "${rootfs}/etc/udhcpc.script"
# Debian's busybox-static has no nohup applet; scripts written for a full guest use it.
printf '#!/bin/sh\ntrap "" HUP\nexec "$@"\n' >"${rootfs}/usr/bin/nohup"
chmod 0755 "${rootfs}/usr/bin/nohup"
# qemu-guest-agent's guest-shutdown (libvirt's default shutdown, so KubeVirt's graceful stop
# and virtctl restart) runs "/sbin/shutdown -h -P|-H|-r +0 <message>"; busybox has no shutdown
# applet and /init handles no signal. Answer the agent, then power off (or reboot) at once:
# without this a stop waits out the VM's whole termination grace period.
cat >"${rootfs}/sbin/shutdown" <<'SHUTDOWN'
#!/bin/sh
case " $* " in *" -r "*) act=reboot ;; *) act=poweroff ;; esac
echo "FPGUEST-SHUTDOWN $act ($*)" >/dev/ttyS0 2>/dev/null
(sync; sleep 1; "$act" -f) </dev/null >/dev/null 2>&1 &
exit 0
SHUTDOWN
chmod 0755 "${rootfs}/sbin/shutdown"
echo "root:x:0:0:root:/root:/bin/sh" >"${rootfs}/etc/passwd"
echo "/bin/sh" >"${rootfs}/etc/shells"
mkdir -p "${rootfs}/root"
echo "root:x:0:" >"${rootfs}/etc/group"
printf 'netperf 12865/tcp\n' >"${rootfs}/etc/services"

(cd "$rootfs" && find . -print0 | cpio --null -o -H newc --quiet | gzip -6) >"${OUT}/initramfs.gz.tmp"
cp "${work}/k/boot/vmlinuz-${kver}" "${OUT}/vmlinuz.tmp"
mv "${OUT}/initramfs.gz.tmp" "${OUT}/initramfs.gz"
mv "${OUT}/vmlinuz.tmp" "${OUT}/vmlinuz"
echo "${kernel_pkg} ${kernel_ver}" >"${OUT}/kernel"
echo "$want" >"${OUT}/stamp"
log "guest image ready: ${OUT} ($(du -sh "${OUT}/initramfs.gz" | cut -f1) initramfs, kernel ${kver})"
