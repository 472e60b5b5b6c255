#!/usr/bin/env bash
# Runs the unit tests of the vhost-device-vsock that hack/setup.sh builds: the
# crates.io release (VHOST_VSOCK_VERSION in hack/setup.sh) with this directory's
# patches, whose tests cover the sibling path they fix (docs/vsock-sibling.md).
#
#   hack/vhost-device-vsock/test.sh [test binary arguments, e.g. a name filter]
#
# The source is unpacked and patched into _out/vhost-device-vsock/src (source.sh),
# built in _out/vhost-device-vsock/target. Set CARGO_BUILD_JOBS=1 on a busy machine.
#
# The crate's tests of its AF_VSOCK backend (--forward-cid/--forward-listen, feature
# backend_vsock) are skipped: they bind and connect AF_VSOCK sockets on this host
# (VMADDR_CID_LOCAL, VMADDR_CID_ANY), which Fastpath never does. They cannot be
# compiled out instead: 0.3.0 does not build its tests without default features.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${ROOT}/_out/vhost-device-vsock"
VERSION="$(sed -n 's/^VHOST_VSOCK_VERSION=//p' "${ROOT}/hack/setup.sh")"
if ! command -v cargo >/dev/null 2>&1 && [[ -x "${HOME}/.cargo/bin/cargo" ]]; then
  export PATH="${HOME}/.cargo/bin:${PATH}"
fi

AF_VSOCK_TESTS=(
  tests::test_vsock_config_setup_vsock
  tests::test_vsock_config_setup_from_vm_args_vsock
  tests::test_vsock_config_setup_from_file_vsock
  tests::test_vsock_server_vsock
  tests::test_main_structs_vsock
  thread_backend::tests::test_vsock_thread_backend_vsock
  vhu_vsock::tests::test_vsock_backend_vsock
  vhu_vsock_thread::tests::test_vsock_thread_vsock
  vhu_vsock_thread::tests::test_vsock_thread_vsock_backend
)

bash "${ROOT}/hack/vhost-device-vsock/source.sh" "${VERSION}" "${OUT}/src"
cargo=(cargo test --locked --manifest-path "${OUT}/src/Cargo.toml" --target-dir "${OUT}/target")

# A test of the AF_VSOCK backend that this list does not name (a new release, a new
# test) must not run unnoticed: they are all named *_vsock or *_vsock_backend.
listed="$("${cargo[@]}" --quiet -- --list --format terse | sed -n 's/: test$//p')"
for t in ${listed}; do
  if [[ "${t}" == *_vsock || "${t}" == *_vsock_backend ]] && [[ ! " ${AF_VSOCK_TESTS[*]} " == *" ${t} "* ]]; then
    echo "test.sh: ${t} looks like a test of the AF_VSOCK backend: add it to AF_VSOCK_TESTS or rename it" >&2
    exit 1
  fi
done

skips=()
for t in "${AF_VSOCK_TESTS[@]}"; do
  skips+=(--skip "${t}")
done
"${cargo[@]}" -- "${skips[@]}" "$@"
