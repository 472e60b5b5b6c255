ip netns exec fpnpcap31653 no-such-netperf -H 127.0.0.1
