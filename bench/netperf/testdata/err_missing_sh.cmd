sh -c no-such-netperf -H 127.0.0.1
