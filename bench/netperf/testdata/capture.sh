#!/bin/sh
# Regenerates the captured netperf outputs the parser is table-tested against.
# Run as root from this directory on a machine with Debian's netperf 2.7.0:
#   ./capture.sh
# The client runs in one network namespace and netserver in another, joined
# by a veth (10.199.0.1 and .2), the shape of the local benchmark's paths;
# -c -C measure CPU on both ends, which on one host is the same host-wide
# /proc/stat figure twice.
# For each case NAME it writes NAME.cmd (the command line), NAME.stdout,
# NAME.stderr and NAME.rc (exit status). Nothing here is edited by hand.
# ONLY=name1,name2 ./capture.sh recaptures only those cases (the netserver
# kill races the client, so err_netserver_died may need another go).
set -u
PORT=${PORT:-22865}
DEAD=${DEAD:-22866}
CPU=LOCAL_CPU_UTIL,REMOTE_CPU_UTIL,LOCAL_SD,REMOTE_SD,SD_UNITS,LOCAL_CPU_METHOD
STREAM=THROUGHPUT,THROUGHPUT_UNITS,ELAPSED_TIME,LSS_SIZE_END,RSR_SIZE_END,TRANSPORT_MSS,$CPU
RR=$STREAM,TRANSACTION_RATE,REQUEST_SIZE,RESPONSE_SIZE,MEAN_LATENCY,P99_LATENCY
UDP=$STREAM,LOCAL_SEND_CALLS,REMOTE_RECV_CALLS
CNS=fpnpc$$
SNS=fpnps$$
ip netns add "$CNS" && ip netns add "$SNS" || exit 1
ip link add fpnpc$$ type veth peer name fpnps$$
ip link set fpnpc$$ netns "$CNS" && ip link set fpnps$$ netns "$SNS"
ip -n "$CNS" addr add 10.199.0.1/24 dev fpnpc$$ && ip -n "$SNS" addr add 10.199.0.2/24 dev fpnps$$
for n in "$CNS" "$SNS"; do ip -n "$n" link set lo up; done
ip -n "$CNS" link set fpnpc$$ up && ip -n "$SNS" link set fpnps$$ up
C="ip netns exec $CNS"
H=10.199.0.2

capture() { # NAME COMMAND...
	name=$1; shift
	case ",${ONLY:-$name}," in *",$name,"*) ;; *) return 0 ;; esac
	echo "$*" > "$name.cmd"
	"$@" > "$name.stdout" 2> "$name.stderr"
	echo $? > "$name.rc"
	echo "$name: rc=$(cat "$name.rc") $(head -c 120 "$name.stdout" | head -1)"
}

ip netns exec "$SNS" netserver -D -L "$H" -p "$PORT" > /dev/null 2>&1 &
NS=$!
trap 'kill $NS 2>/dev/null; ip netns del "$CNS"; ip netns del "$SNS"' EXIT
sleep 0.5

# What fastpath-bench runs (bench/netperf Spec.Command).
capture tcp_stream_256k_64k $C netperf -H $H -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -c -C -- -s 262144 -S 262144 -m 65536 -o $STREAM
capture tcp_stream_64k_512 $C netperf -H $H -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -c -C -- -s 65536 -S 65536 -m 512 -o $STREAM
capture tcp_stream_default_sock $C netperf -H $H -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -c -C -- -m 16384 -o $STREAM
capture tcp_rr_1 $C netperf -H $H -p "$PORT" -t TCP_RR -l 1 -f m -P 0 -c -C -j -- -s 262144 -S 262144 -r 1,1 -o $RR
capture tcp_rr_4k $C netperf -H $H -p "$PORT" -t TCP_RR -l 1 -f m -P 0 -c -C -j -- -s 65536 -S 65536 -r 4096,4096 -o $RR
capture tcp_maerts_256k_64k $C netperf -H $H -p "$PORT" -t TCP_MAERTS -l 1 -f m -P 0 -c -C -- -s 262144 -S 262144 -m 65536 -o $STREAM
capture udp_stream_1472 $C netperf -H $H -p "$PORT" -t UDP_STREAM -l 1 -f m -P 0 -c -C -- -s 262144 -S 262144 -m 1472 -o $UDP
capture tcp_crr_1 $C netperf -H $H -p "$PORT" -t TCP_CRR -l 1 -f m -P 0 -c -C -j -- -r 1,1 -o $RR

# Variants the parser also understands: the banner and header of -P 1, other units.
capture tcp_stream_banner $C netperf -H $H -p "$PORT" -t TCP_STREAM -l 1 -f m -c -C -- -m 4096 -o $STREAM
capture tcp_stream_gbits $C netperf -H $H -p "$PORT" -t TCP_STREAM -l 1 -f g -P 0 -c -C -- -m 4096 -o $STREAM
capture tcp_stream_mbytes $C netperf -H $H -p "$PORT" -t TCP_STREAM -l 1 -f M -P 0 -c -C -- -m 4096 -o $STREAM
capture tcp_rr_transs $C netperf -H $H -p "$PORT" -t TCP_RR -l 1 -P 0 -c -C -j -- -r 1,1 -o $RR

# Errors.
capture err_no_netserver $C netperf -H $H -p "$DEAD" -t TCP_STREAM -l 1 -f m -P 0 -- -m 4096 -o $STREAM
capture err_resolve $C netperf -H no-such-host.invalid -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -- -m 4096 -o $STREAM
capture err_unknown_test $C netperf -H $H -p "$PORT" -t TCP_FOO -l 1 -f m -P 0 -- -o $STREAM
capture err_unknown_selector $C netperf -H $H -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -c -C -- -m 4096 -o THROUGHPUT,NO_SUCH_SELECTOR,ELAPSED_TIME,LSS_SIZE_END,RSR_SIZE_END,TRANSPORT_MSS,$CPU
capture err_no_output $C netperf -H $H -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -c -C -- -m 4096 -o OUTPUT_NONE
# A network namespace with only loopback: getaddrinfo fails even for 127.0.0.1.
NETNS=fpnpcap$$
ip netns add "$NETNS" && ip -n "$NETNS" link set lo up
capture err_netns_loopback_only ip netns exec "$NETNS" netperf -H 127.0.0.1 -p "$PORT" -t TCP_STREAM -l 1 -f m -P 0 -c -C -- -m 4096 -o $STREAM
capture err_missing_netns ip netns exec "$NETNS" no-such-netperf -H 127.0.0.1
ip netns del "$NETNS"
capture err_missing_sh sh -c 'no-such-netperf -H 127.0.0.1'

# The netserver goes away in the middle of a test.
ip netns exec "$SNS" netserver -D -L "$H" -p "$DEAD" > /dev/null 2>&1 &
NS2=$!
sleep 0.5
( sleep 1; pkill -P "$NS2"; kill "$NS2" ) &
capture err_netserver_died $C netperf -H $H -p "$DEAD" -t TCP_STREAM -l 3 -f m -P 0 -c -C -- -m 4096 -o $STREAM
( sleep 1; pkill -P "$NS"; kill "$NS" ) &
capture err_netserver_died_rr $C netperf -H $H -p "$PORT" -t TCP_RR -l 3 -f m -P 0 -c -C -j -- -r 1,1 -o $RR
wait
