netperf -H 127.0.0.1 -p 22865 -t TCP_STREAM -l 1 -f m -P 0 -- -m 4096 -o OUTPUT_NONE
