ip netns exec fpnpc31653 netperf -H 10.199.0.2 -p 22865 -t TCP_STREAM -l 1 -f m -P 0 -c -C -- -m 4096 -o OUTPUT_NONE
