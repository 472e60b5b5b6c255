#!/usr/bin/env python3
"""Writes results.json, a SYNTHETIC results document for the report tests.

The numbers are made up to resemble the shapes of DESIGN section 5.2 (a
2-core machine: untuned 4.5 Gbit/s, MTU 9000 13.5, ceiling 16.4); they were
not measured, and the document says so in machine.emulated. Run:
    python3 gen_fixture.py > results.json
"""
import json

paths = [  # name, MTU, Gbit/s at 256 KiB / 64 KiB / 1 session, mean RR latency us
    ("baseline-untuned", 1500, 4.5, 31.0),
    ("baseline-masquerade", 1500, 9.8, 38.0),
    ("fastpath-linux-bridge", 9000, 13.5, 26.0),
    ("fastpath-linux-bridge", 65520, 15.9, 25.0),
    ("ceiling", 65535, 16.4, 22.0),
]
# Small messages cost per-packet work, which hurts the untuned paths most.
msg_exp = {"baseline-untuned": 1.3, "baseline-masquerade": 1.15, "fastpath-linux-bridge": 1.0, "ceiling": 0.95}
msg_factor = {512: 0.22, 4096: 0.66, 16384: 0.9, 65536: 1.0}
sock_factor = {65536: 0.78, 262144: 1.0}
sess_factor = {1: 1.0, 5: 1.35}
jitter = [1.0, 0.96, 1.05]  # per repetition
# Service demand in us/KiB at 64 KiB messages (netperf -c -C, host-wide on one
# host); smaller messages cost more per byte, receiving a little more.
sd_base = {("baseline-untuned", 1500): 6.0, ("baseline-masquerade", 1500): 4.5,
           ("fastpath-linux-bridge", 9000): 3.2, ("fastpath-linux-bridge", 65520): 2.6, ("ceiling", 65535): 2.4}
sd_msg = {512: 3.0, 4096: 1.6, 16384: 1.15, 65536: 1.0}
sd_jitter = [1.0, 1.04, 0.97]


def run(path, mtu, test, sock, msg, sessions, pairs, samples):
    tp = [s["throughputMbps"] for s in samples]
    r = {"path": path, "test": test, "socketBytes": sock, "messageBytes": msg,
         "sessions": sessions, "pairs": pairs, "mtu": mtu,
         "throughputMbps": sorted(tp)[1], "throughputMinMbps": min(tp), "throughputMaxMbps": max(tp)}
    if pairs > 1:
        r["perPairThroughputMbps"] = [sorted(s["perPairThroughputMbps"][i] for s in samples)[1] for i in range(pairs)]
    sds = [s["serviceDemandUsPerKB"] for s in samples if "serviceDemandUsPerKB" in s]
    if sds:
        r["serviceDemandUsPerKB"], r["serviceDemandMinUsPerKB"], r["serviceDemandMaxUsPerKB"] = sorted(sds)[1], min(sds), max(sds)
        r["cpuUtilPercent"], r["cpuScope"] = 80.0, "host"
    if test == "TCP_RR":
        for k, lo, hi in (("meanLatencyUs", "meanLatencyMinUs", "meanLatencyMaxUs"), ("p99LatencyUs", "p99LatencyMinUs", "p99LatencyMaxUs")):
            v = [s[k] for s in samples]
            r[k], r[lo], r[hi] = sorted(v)[1], min(v), max(v)
        r["transactionsPerSec"] = sorted(s["transactionsPerSec"] for s in samples)[1]
    r["samples"] = samples
    return r


def with_sd(sample, sd):
    """Adds a service demand to a sample and its sessions (one host)."""
    sample["serviceDemandUsPerKB"], sample["cpuUtilPercent"] = sd, 80.0
    for x in sample["perSession"]:
        x.update({"cpuUtilPercent": 80.0, "serviceDemandUsPerKB": sd, "cpuScope": "host"})
    return sample


def sessions_of(pairs, sessions, mbps, host, rr=None):
    out = []
    for p in range(1, pairs + 1):
        for s in range(1, sessions + 1):
            d = {"pair": p, "session": s, "endpoint": f"{host}{p}:12865",
                 "throughputMbps": round(mbps / (pairs * sessions), 2), "elapsedSec": 60.0}
            if rr:
                d.update(rr)
            out.append(d)
    return out


runs = []
for sock in (65536, 262144):
    for msg in (512, 4096, 16384, 65536):
        for sessions in (1, 5):
            for name, mtu, gbps, _ in paths:
                samples = []
                for i, j in enumerate(jitter):
                    mbps = round(gbps * 1000 * msg_factor[msg] ** msg_exp[name] * sock_factor[sock] * sess_factor[sessions] * j, 2)
                    sd = round(sd_base[(name, mtu)] * sd_msg[msg] * sd_jitter[i], 3)
                    samples.append(with_sd({"repetition": i + 1, "throughputMbps": mbps,
                                            "perSession": sessions_of(1, sessions, mbps, "10.250.0.")}, sd))
                runs.append(run(name, mtu, "TCP_STREAM", sock, msg, sessions, 1, samples))
# The receive direction at 256 KiB, one session: a little slower, a little dearer.
for msg in (512, 4096, 16384, 65536):
    for name, mtu, gbps, _ in paths:
        samples = []
        for i, j in enumerate(jitter):
            mbps = round(0.92 * gbps * 1000 * msg_factor[msg] ** msg_exp[name] * j, 2)
            sd = round(1.1 * sd_base[(name, mtu)] * sd_msg[msg] * sd_jitter[i], 3)
            samples.append(with_sd({"repetition": i + 1, "throughputMbps": mbps,
                                    "perSession": sessions_of(1, 1, mbps, "10.250.0.")}, sd))
        runs.append(run(name, mtu, "TCP_MAERTS", 262144, msg, 1, 1, samples))
for sock in (65536, 262144):
    for sessions in (1, 5):
        for name, mtu, _, lat in paths:
            samples = []
            for i, j in enumerate(jitter):
                mean = round(lat * (1.25 if sessions == 5 else 1.0) / j, 2)
                tps = round(sessions * 1e6 / mean, 3)
                rr = {"transactionsPerSec": round(tps / sessions, 3), "meanLatencyUs": mean, "p99LatencyUs": round(mean * 3.2)}
                samples.append({"repetition": i + 1, "throughputMbps": round(tps * 2 * 8 / 1e6, 4),
                                "transactionsPerSec": tps, "meanLatencyUs": mean, "p99LatencyUs": round(mean * 3.2),
                                "perSession": sessions_of(1, sessions, tps * 2 * 8 / 1e6, "10.250.0.", rr)})
            runs.append(run(name, mtu, "TCP_RR", sock, 1, sessions, 1, samples))
# Scale-out at the headline point: aggregate grows sub-linearly on 2 cores.
for pairs in (2, 4):
    for name, mtu, gbps, _ in (paths[0], paths[3]):
        samples = []
        for i, j in enumerate(jitter):
            total = gbps * 1000 * (1.45 if pairs == 2 else 1.6) * j
            per = [round(total / pairs * (1 + 0.04 * (k - pairs / 2)), 2) for k in range(pairs)]
            samples.append({"repetition": i + 1, "throughputMbps": round(sum(per), 2), "perPairThroughputMbps": per,
                            "perSession": sessions_of(pairs, 1, sum(per), "10.250.0.")})
        runs.append(run(name, mtu, "TCP_STREAM", 262144, 65536, 1, pairs, samples))

doc = {"machine": {"hostname": "fixture", "kernel": "6.1.0-synthetic", "cpus": 2, "goVersion": "go1.26.0",
                   "timestamp": "2025-01-01T00:00:00Z", "netperf": "Netperf version 2.7.0",
                   "emulated": "SYNTHETIC fixture for the report tests: made-up numbers, not measurements"},
       "runs": runs}
print(json.dumps(doc, indent=1))
