#!/usr/bin/env bash
# Checks that the patches' tests catch the defects they fix: runs each test the
# patches add against the UNPATCHED release (its code with the patched tests
# modules: every `#[cfg(test)]` module of the patched source put in place of the
# release's own) and expects it to fail, except the guards that pass either way.
# Then `hack/vhost-device-vsock/test.sh` shows the same tests pass with the patches.
#
#   hack/vhost-device-vsock/test-unpatched.sh
#
# Prints one line per test (FAILS UNPATCHED / passes unpatched) and exits non-zero
# when a test meant to catch a defect passes without the fix. Builds in
# _out/vhost-device-vsock/{unpatched,target-unpatched}. Never part of `make test`: it proves
# the tests, not the backend.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="${ROOT}/hack/vhost-device-vsock"
OUT="${ROOT}/_out/vhost-device-vsock"
VERSION="$(sed -n 's/^VHOST_VSOCK_VERSION=//p' "${ROOT}/hack/setup.sh")"
if ! command -v cargo >/dev/null 2>&1 && [[ -x "${HOME}/.cargo/bin/cargo" ]]; then
  export PATH="${HOME}/.cargo/bin:${PATH}"
fi

# Tests the patches add, and whether each must fail on the release.
TESTS=(
  "thread_backend::tests::test_sibling_pkt_larger_than_rx_buffer_is_split fail"
  "thread_backend::tests::test_sibling_seqpacket_split_keeps_eom_eor_on_last_piece fail"
  "thread_backend::tests::test_sibling_pkt_that_fits_is_not_split pass"
  "vhu_vsock_thread::tests::test_sibling_pkt_used_len_fits_each_rx_buffer fail"
  "vhu_vsock_thread::tests::test_sibling_pkt_before_front_end_connects_stays_queued fail"
  "vhu_vsock_thread::tests::test_sibling_pkt_while_rx_ring_stopped_stays_queued fail"
  "thread_backend::tests::test_sibling_queue_keeps_the_newest_within_a_bound fail"
  "thread_backend::tests::test_sibling_unknown_cid_gets_rst fail"
  "thread_backend::tests::test_shutdown_resets_each_connection_of_the_guest fail"
  "vhu_vsock_thread::tests::test_shutdown_sends_the_guest_an_rst_per_connection fail"
)

bash "${HERE}/source.sh" "${VERSION}" "${OUT}/src"
rm -rf "${OUT}/unpatched"
cp -a "${OUT}/src" "${OUT}/unpatched"
patches=("${HERE}"/*.patch)
for ((i = ${#patches[@]} - 1; i >= 0; i--)); do
  patch -d "${OUT}/unpatched" -p1 -R --silent --no-backup-if-mismatch <"${patches[i]}"
done
for f in "${OUT}"/src/src/*.rs; do
  u="${OUT}/unpatched/src/$(basename "${f}")"
  { sed '/^#\[cfg(test)\]$/,$d' "${u}"; sed -n '/^#\[cfg(test)\]$/,$p' "${f}"; } >"${u}.new"
  mv "${u}.new" "${u}"
done

# A target directory of its own: cargo names the crate's build the same for every
# copy of the source and decides by mtime whether it is fresh.
find "${OUT}/unpatched" -exec touch {} +
cargo=(cargo test --locked --manifest-path "${OUT}/unpatched/Cargo.toml" --target-dir "${OUT}/target-unpatched")
"${cargo[@]}" --no-run --quiet
wrong=0
for entry in "${TESTS[@]}"; do
  read -r name want <<<"${entry}"
  if "${cargo[@]}" --quiet -- --exact "${name}" >"${OUT}/unpatched.log" 2>&1; then
    got=pass
    echo "passes unpatched:  ${name}"
  else
    got=fail
    echo "FAILS UNPATCHED:   ${name}: $(grep -m1 -E "panicked at|assertion" -A2 "${OUT}/unpatched.log" | tr '\n' ' ' | cut -c1-220)"
  fi
  if [[ "${got}" != "${want}" ]]; then
    echo "  ^ expected it to ${want} on the unpatched release" >&2
    wrong=1
  fi
done
exit "${wrong}"
