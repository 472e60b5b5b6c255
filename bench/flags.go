package bench

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseSizes parses a comma-separated list of byte sizes, each a number with
// an optional binary suffix K/KiB or M/MiB (case-insensitive): "64K,256KiB"
// is [65536 262144]; "0" means the kernel default where a socket size is
// meant.
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		low := strings.ToLower(f)
		for _, suf := range []struct {
			s string
			m int
		}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"k", 1 << 10}, {"m", 1 << 20}} {
			if strings.HasSuffix(low, suf.s) {
				f, mult = f[:len(f)-len(suf.s)], suf.m
				break
			}
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > (1<<31-1)/mult {
			return nil, fmt.Errorf("failed to parse size %q in %q: want a non-negative number with an optional K, KiB, M or MiB suffix", f, s)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// ParseCounts parses a comma-separated list of positive integers, e.g. "1,5".
func ParseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("failed to parse count %q in %q: want a positive integer", f, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseList splits a comma-separated list and drops empty items.
func ParseList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ParsePath parses "name=host[:port][,host[:port]...]" into a Path whose
// endpoints (one per pair) run the client locally. IPv6 addresses with a
// port are bracketed: "fast=[fd00::2]:12866".
func ParsePath(s string) (Path, error) {
	name, rest, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || rest == "" {
		return Path{}, fmt.Errorf("failed to parse path %q: want name=host[:port][,host[:port]...]", s)
	}
	p := Path{Name: name}
	for _, hp := range ParseList(rest) {
		ep, err := parseHostPort(hp)
		if err != nil {
			return Path{}, fmt.Errorf("failed to parse path %q: %w", s, err)
		}
		p.Endpoints = append(p.Endpoints, ep)
	}
	if len(p.Endpoints) == 0 {
		return Path{}, fmt.Errorf("failed to parse path %q: no host", s)
	}
	return p, nil
}

func parseHostPort(s string) (Endpoint, error) {
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return Endpoint{}, fmt.Errorf("failed to parse endpoint %q: %w", s, err)
		}
		port, err := strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			return Endpoint{}, fmt.Errorf("failed to parse endpoint %q: port %q out of range 1-65535", s, p)
		}
		return Endpoint{Host: h, Port: port}, nil
	}
	return Endpoint{Host: s}, nil
}

// ParseNameInt parses "name=N" (e.g. an MTU per path: "fast=9000").
func ParseNameInt(s string) (string, int, error) {
	name, v, ok := strings.Cut(s, "=")
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if !ok || strings.TrimSpace(name) == "" || err != nil || n < 0 {
		return "", 0, fmt.Errorf("failed to parse %q: want name=N with N a non-negative integer", s)
	}
	return strings.TrimSpace(name), n, nil
}
