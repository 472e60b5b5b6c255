#!/bin/sh
# Regenerates the captured netperf outputs the parser is table-tested against.
# Run as root from this directory on a machine with Debian's netperf 2.7.0:
#   ./capture.sh
# For each case NAME it writes NAME.cmd (the command line), NAME.stdout,
# NAME.stderr and NAME.rc (exit status). Nothing here is edited by hand.
set -u
PORT=${PORT:-22865}
DEAD=${DEAD:-22866}
STREAM=THROUGHPUT,THROUGHPUT_UNITS,ELAPSED_TIME,LSS_SIZE_END,RSR_SIZE_END,TRANSPORT_MSS
RR=$STREAM,TRANSACTION_RATE,REQUEST_SIZE,RESPONSE_SIZE,MEAN_LATENCY,P99_LATENCY

capture() { # NAME COMMAND...
	name=$1; shift
	echo "$*" > "$name.cmd"
	"$@" > "$name.stdout" 2> "$name.stderr"
	echo $? > "$name.rc"
	echo "$name: rc=$(cat "$name.rc") $(head -c 120 "$name.stdout" | head -1)"
}

netserver -D -L 127.0.0.1 -p "$PORT" > /dev/null 2>&1 &
NS=$!
trap 'kill $NS 2>/dev/null' EXIT
sleep 0.5

# What fastpath-bench runs (internal/bench/netperf Spec.Command).
capture tcp_stream_256k_64k netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -- -s 262144 -S 262144 -m 65536 -o $STREAM
capture tcp_stream_64k_512 netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -- -s 65536 -S 65536 -m 512 -o $STREAM
capture tcp_stream_default_sock netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -- -m 16384 -o $STREAM
capture tcp_rr_1 netperf -H 127.0.0.1 -p "$PORT" -t TCP_RR -l 1 -f m -P 0 -j -- -s 262144 -S 262144 -r 1,1 -o $RR
capture tcp_rr_4k netperf -H 127.0.0.1 -p "$PORT" -t TCP_RR -l 1 -f m -P 0 -j -- -s 65536 -S 65536 -r 4096,4096 -o $RR

# Variants the parser also understands: the banner and header of -P 1, other units.
capture tcp_stream_banner netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f m -- -m 4096 -o $STREAM
capture tcp_stream_gbits netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f g -P 0 -- -m 4096 -o $STREAM
capture tcp_stream_mbytes netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f M -P 0 -- -m 4096 -o $STREAM
capture tcp_rr_transs netperf -H 127.0.0.1 -p "$PORT" -t TCP_RR -l 1 -P 0 -j -- -r 1,1 -o $RR

# Errors.
capture err_no_netserver netperf -H 127.0.0.1 -p "$DEAD" -t TCP_STREAM -l 1 -f m -P 0 -- -m 4096 -o $STREAM
capture err_resolve netperf -H no-such-host.invalid -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -- -m 4096 -o $STREAM
capture err_unknown_test netperf -H 127.0.0.1 -p "$PORT" -t TCP_FOO -l 1 -f m -P 0 -- -o $STREAM
capture err_unknown_selector netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -- -m 4096 -o THROUGHPUT,NO_SUCH_SELECTOR,ELAPSED_TIME,LSS_SIZE_END,RSR_SIZE_END,TRANSPORT_MSS
capture err_no_output netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -- -m 4096 -o OUTPUT_NONE
# A network namespace with only loopback: getaddrinfo fails even for 127.0.0.1.
NETNS=fpnpcap$$
ip netns add "$NETNS" && ip -n "$NETNS" link set lo up
capture err_netns_loopback_only ip netns exec "$NETNS" netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -- -m 4096 -o $STREAM
capture err_missing_netns ip netns exec "$NETNS" no-such-netperf -H 127.0.0.1
ip netns del "$NETNS"
capture err_missing_sh sh -c 'no-such-netperf -H 127.0.0.1'

# The netserver goes away in the middle of a test.
netserver -D -L 127.0.0.1 -p "$DEAD" > /dev/null 2>&1 &
NS2=$!
sleep 0.5
( sleep 1; pkill -P "$NS2"; kill "$NS2" ) &
capture err_netserver_died netperf -H 127.0.0.1 -p "$DEAD" -t TCP_STREAM -l 3 -f m -P 0 -- -m 4096 -o $STREAM
( sleep 1; pkill -P "$NS"; kill "$NS" ) &
capture err_netserver_died_rr netperf -H 127.0.0.1 -p "$PORT" -t TCP_RR -l 3 -f m -P 0 -j -- -r 1,1 -o $RR
wait
