#!/usr/bin/env bash
# Unpacks the vhost-device-vsock crate released on crates.io and applies this
# directory's patches to it, in order (docs/vsock-sibling.md says what they fix).
#
#   hack/vhost-device-vsock/source.sh <version> <dir>
#
# <dir> then holds the patched crate source, with the release's own Cargo.lock, so
# `cargo install --locked --path <dir>` builds it with the dependencies published
# with the release. An up-to-date <dir> (same version and patches) is left alone;
# otherwise it is replaced whole. Used by hack/setup.sh, hack/vhost-device-vsock/test.sh
# and the Dockerfile's vhost-device-vsock stage. Needs cargo, sha256sum, tar and patch.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CRATE=vhost-device-vsock
# The release the patches are written against, and the sha256 of its .crate as the
# crates.io index records it (cargo checks the download against the index; this
# checks that the index still says what it said when the patches were written).
PATCHED_VERSION=0.3.0
CRATE_SHA256=52ce95d81af89ad693d067c650e42df0f217addfbc96cc4820f7c62eb4a28b13

version=${1:?usage: source.sh <version> <dir>}
dest=${2:?usage: source.sh <version> <dir>}
if [[ "${version}" != "${PATCHED_VERSION}" ]]; then
  echo "source.sh: the patches in ${HERE} are for ${CRATE} ${PATCHED_VERSION}, not ${version}: port them first" >&2
  exit 1
fi
patches=("${HERE}"/*.patch)
stamp="${CRATE} ${version} $(cat "${patches[@]}" | sha256sum | cut -c1-16)"

mkdir -p "$(dirname "${dest}")"
exec 9>"${dest}.lock"
flock 9
if [[ "$(cat "${dest}/.fastpath-patches" 2>/dev/null)" == "${stamp}" ]]; then
  exit 0
fi

if ! command -v cargo >/dev/null 2>&1 && [[ -x "${HOME}/.cargo/bin/cargo" ]]; then
  export PATH="${HOME}/.cargo/bin:${PATH}"
fi
work="$(mktemp -d "$(dirname "${dest}")/.${CRATE}.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

# cargo downloads a crate only as a dependency: `cargo fetch` of a throwaway package
# that depends on exactly this release downloads its .crate into the registry cache
# of CARGO_HOME, checked against the crates.io index (cargo warns that a binary-only
# crate is no usable dependency; it fetches it all the same).
mkdir -p "${work}/fetch/src"
cat >"${work}/fetch/Cargo.toml" <<EOF
[package]
name = "fastpath-fetch-${CRATE}"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
${CRATE} = "=${version}"
EOF
: >"${work}/fetch/src/lib.rs"
if ! cargo fetch --quiet --manifest-path "${work}/fetch/Cargo.toml" 2>"${work}/fetch.err"; then
  cat "${work}/fetch.err" >&2
  echo "source.sh: cargo could not fetch ${CRATE} ${version}" >&2
  exit 1
fi
crate_file=""
for f in "${CARGO_HOME:-${HOME}/.cargo}"/registry/cache/*/"${CRATE}-${version}.crate"; do
  if [[ -f "${f}" && "$(sha256sum "${f}" | cut -d' ' -f1)" == "${CRATE_SHA256}" ]]; then
    crate_file="${f}"
    break
  fi
done
if [[ -z "${crate_file}" ]]; then
  echo "source.sh: cargo fetched no ${CRATE}-${version}.crate with sha256 ${CRATE_SHA256} into ${CARGO_HOME:-${HOME}/.cargo}/registry/cache" >&2
  exit 1
fi

# Unpack the checked .crate ourselves (cargo's unpacked copy is shared and writable).
tar -xzf "${crate_file}" -C "${work}"
src="${work}/${CRATE}-${version}"
for p in "${patches[@]}"; do
  if ! patch -d "${src}" -p1 --forward --silent --no-backup-if-mismatch <"${p}"; then
    echo "source.sh: $(basename "${p}") does not apply to ${CRATE} ${version}" >&2
    exit 1
  fi
done
echo "${stamp}" >"${src}/.fastpath-patches"
# The .crate's files carry their release dates, and patch dates only what it
# changes: a file that a removed patch no longer changes would be older than an
# earlier build of it, and cargo (which compares mtimes) would keep that build.
find "${src}" -exec touch {} +

rm -rf "${dest}"
mv "${src}" "${dest}"
