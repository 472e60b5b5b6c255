ip netns exec fpnpcap24001 no-such-netperf -H 127.0.0.1
