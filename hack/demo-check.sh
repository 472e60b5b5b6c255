#!/usr/bin/env bash
# demo-check.sh netns|qemu: run the README's main job as a user does (`make demo`,
# or `make demo GUESTS=qemu`) and fail unless it exits 0 and prints the lines a
# user reads. make test runs both (issue 43: a regression in the real-guest demo
# once landed green because nothing ran it). The output is kept in
# _out/demo-check/<mode>.log.
#
# Each pattern is an extended regular expression that one line of the demo's
# output must match; the lists are the demo's own lines (e2e/localenv/demo):
# the steps, the benchmark's speed-up, the guests' reports and the ratios.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=${1:?usage: demo-check.sh netns|qemu}
common=(
  '^\[1/[0-9]+\] Embedded control plane'
  '^\[3/[0-9]+\] Apply config/samples/ with kubectl'
  '^FastPathAttachment db-link: Ready=True'
  '^removed everything the demo made'
  '^demo took '
)
case "$mode" in
netns)
  args=()
  want=(
    "${common[@]}"
    '^status: best [0-9.]+ Gbit/s, speed-up [0-9.]+'
  )
  ;;
qemu)
  args=(GUESTS=qemu)
  want=(
    "${common[@]}"
    '^guest db-0: eth1 mtu 9000 rx 1024 tx 256 queues 2 tso on +\[REAL VM'
    '^guest db-1: eth1 mtu 9000 rx 1024 tx 256 queues 2 tso on +\[REAL VM'
    '^FastPathAttachment queue-link: Ready=True'
    '^guest queue-0: eth1 mtu 9000 '
    '^  TCP_STREAM +fast path +[0-9.]+ Mbit/s +pod network +[0-9.]+ Mbit/s +ratio fastpath/pod-network [0-9.]+'
    '^guest db-1 \(CID [0-9]+\) dials CID 2 port [0-9]+ through the agent.s relay -> "db-0 answers'
    '^guest outsider \(CID 99, in no attachment\) dials CID 2 port [0-9]+ -> refused by the relay'
    '^guest queue-1 \(CID [0-9]+\) dials CID [0-9]+ port 5672 directly'
    '^ratio vsock-sibling/vsock-relay [0-9.]+ '
    '^ratio vsock-sibling/fastpath [0-9.]+ '
    '^guest db-0 after the restart: eth0 mtu 1500 .*no fast-path NIC'
  )
  ;;
*)
  echo "demo-check: unknown mode $mode (netns or qemu)" >&2
  exit 2
  ;;
esac

out=_out/demo-check
mkdir -p "$out"
log="$out/$mode.log"
start=$(date +%s)
rc=0
make --no-print-directory demo "${args[@]}" >"$log" 2>&1 || rc=$?
took=$(($(date +%s) - start))
if ((rc != 0)); then
  tail -n 40 "$log"
  echo "demo-check $mode: make demo${args[*]:+ ${args[*]}} exited $rc after ${took}s (whole output: $log)"
  exit 1
fi
missing=0
for re in "${want[@]}"; do
  if ! grep -Eq -- "$re" "$log"; then
    echo "demo-check $mode: no line of the output matches: $re"
    missing=$((missing + 1))
  fi
done
grep -E '^(status: best|  TCP_STREAM|ratio |demo took)' "$log" || true
if ((missing > 0)); then
  echo "demo-check $mode: $missing of ${#want[@]} expected lines missing after ${took}s (whole output: $log)"
  exit 1
fi
echo "demo-check $mode: make demo${args[*]:+ ${args[*]}} exited 0 in ${took}s with all ${#want[@]} expected lines"
