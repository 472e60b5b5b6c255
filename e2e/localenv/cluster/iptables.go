package cluster

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// The kubelet makes these iptables chains on every start, whatever its
// configuration (pkg/kubelet/kubelet_network_linux.go): KUBE-IPTABLES-HINT
// and KUBE-KUBELET-CANARY for kube-proxy's mode detection, and KUBE-FIREWALL
// with INPUT and OUTPUT jumps (dropping martian packets to 127.0.0.0/8).
// Debian's iptables is iptables-nft: they live in the nftables tables ip/ip6
// filter, nat and mangle, which the kubelet creates when missing.
var (
	kubeletChains = []struct{ table, chain string }{
		{"filter", "KUBE-FIREWALL"}, {"filter", "KUBE-KUBELET-CANARY"},
		{"nat", "KUBE-KUBELET-CANARY"},
		{"mangle", "KUBE-KUBELET-CANARY"}, {"mangle", "KUBE-IPTABLES-HINT"},
	}
	iptablesFamilies = []struct{ bin, family string }{{"iptables", "ip"}, {"ip6tables", "ip6"}}
	iptablesTables   = []string{"filter", "nat", "mangle"}
)

// nftTables returns the nftables tables of this host as "family name".
func nftTables() ([]string, error) {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil, fmt.Errorf("failed to list the nftables tables: %w", err)
	}
	tables := []string{} // empty, not nil: "recorded, none" in the state file
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "table" {
			tables = append(tables, f[1]+" "+f[2])
		}
	}
	return tables, nil
}

// removeKubeletIPTables deletes the kubelet's jumps and chains, then the
// iptables tables that did not exist before Up (preexisting, as "family
// name") and hold nothing else.
func removeKubeletIPTables(preexisting []string) error {
	for _, f := range iptablesFamilies {
		for _, base := range []string{"INPUT", "OUTPUT"} {
			for exec.Command(f.bin, "-w", "-t", "filter", "-D", base, "-j", "KUBE-FIREWALL").Run() == nil {
			}
		}
		for _, c := range kubeletChains {
			_ = exec.Command(f.bin, "-w", "-t", c.table, "-F", c.chain).Run()
			_ = exec.Command(f.bin, "-w", "-t", c.table, "-X", c.chain).Run()
		}
	}
	tables, err := nftTables()
	if err != nil {
		return err
	}
	var errs []string
	for _, f := range iptablesFamilies {
		for _, t := range iptablesTables {
			id := f.family + " " + t
			if slices.Contains(preexisting, id) || !slices.Contains(tables, id) || !iptablesTableEmpty(f.bin, t) {
				continue
			}
			if out, err := exec.Command("nft", "delete", "table", f.family, t).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Sprintf("nft delete table %s: %v: %s", id, err, strings.TrimSpace(string(out))))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// iptablesTableEmpty reports whether table has only its built-in chains
// with ACCEPT policies and no rules.
func iptablesTableEmpty(bin, table string) bool {
	out, err := exec.Command(bin, "-w", "-t", table, "-S").Output()
	if err != nil {
		return false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(line, "-P ") || !strings.HasSuffix(line, " ACCEPT") {
			return false
		}
	}
	return true
}

// kubeletIPTablesLeft lists the kubelet's chains and the tables it created
// that are still there.
func kubeletIPTablesLeft(preexisting []string) []string {
	var left []string
	for _, f := range iptablesFamilies {
		for _, c := range kubeletChains {
			if exec.Command(f.bin, "-w", "-t", c.table, "-S", c.chain).Run() == nil {
				left = append(left, fmt.Sprintf("%s chain %s %s", f.bin, c.table, c.chain))
			}
		}
	}
	tables, _ := nftTables()
	for _, f := range iptablesFamilies {
		for _, t := range iptablesTables {
			id := f.family + " " + t
			if slices.Contains(tables, id) && !slices.Contains(preexisting, id) {
				left = append(left, "nftables table "+id+" (made by the kubelet's iptables)")
			}
		}
	}
	return left
}
