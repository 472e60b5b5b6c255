package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

func condStatus(conds []metav1.Condition, t string) (string, string) {
	c := apimeta.FindStatusCondition(conds, t)
	if c == nil {
		return "Unknown", ""
	}
	return string(c.Status), c.Reason
}

// writeStatus prints attachments (like `kubectl get fpa -o wide`) with their
// conditions, VMs and vsock services, then nodes with bridges and relay
// listeners.
func writeStatus(w io.Writer, fpas []fastpathv1alpha1.FastPathAttachment, fpns []fastpathv1alpha1.FastPathNode) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// next flushes the table so far and starts a new one, so that each table
	// is aligned on its own.
	next := func(old *tabwriter.Writer) *tabwriter.Writer {
		_ = old.Flush()
		return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	}
	sort.Slice(fpas, func(i, j int) bool { return fpas[i].Namespace+"/"+fpas[i].Name < fpas[j].Namespace+"/"+fpas[j].Name })
	if len(fpas) == 0 {
		fmt.Fprintln(tw, "No FastPathAttachments.")
	}
	for _, a := range fpas {
		ready, reason := condStatus(a.Status.Conditions, fastpathv1alpha1.ReadyCondition)
		fmt.Fprintf(tw, "FASTPATHATTACHMENT\tREADY\tREASON\tDATAPATH\tMTU\tVMS\tSELECTED\tNAD\n")
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", a.Namespace, a.Name, esc(ready), esc(reason), esc(string(a.Status.Datapath)), a.Status.MTU, a.Status.WiredVMs, a.Status.SelectedVMs,
			esc(a.Status.NetworkAttachmentDefinition))
		var conds []string
		for _, c := range a.Status.Conditions {
			s := fmt.Sprintf("%s=%s", esc(c.Type), esc(string(c.Status)))
			if c.Status != "True" && c.Message != "" {
				s += " (" + esc(c.Message) + ")"
			}
			conds = append(conds, s)
		}
		fmt.Fprintf(tw, "  conditions: %s\n", strings.Join(conds, ", "))
		tw = next(tw)
		if len(a.Status.VMs) > 0 {
			fmt.Fprintf(tw, "  VM\tWIRED\tNODE\tINTERFACE\tPOD IFACE\tMAC\tIPS\tMTU\tCID\tRELAY PORTS\tRESTART\tMESSAGE\n")
		}
		for _, vm := range a.Status.VMs {
			cid := "-"
			if vm.CID != nil {
				cid = fmt.Sprint(*vm.CID)
			}
			var ports []string
			for _, p := range vm.RelayPorts {
				ports = append(ports, fmt.Sprintf("%s=%d", esc(p.Service), p.Port))
			}
			ips := make([]string, len(vm.IPs))
			for i, ip := range vm.IPs {
				ips[i] = esc(ip)
			}
			fmt.Fprintf(tw, "  %s\t%t\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%t\t%s\n", esc(vm.Name), vm.Wired, dash(esc(vm.Node)), dash(esc(vm.Interface)), dash(esc(vm.PodInterface)), dash(esc(vm.MAC)),
				dash(strings.Join(ips, ",")), vm.MTU, cid, dash(strings.Join(ports, ",")), vm.RestartRequired, dash(esc(vm.Message)))
		}
		tw = next(tw)
		if len(a.Status.VSOCKServices) > 0 {
			fmt.Fprintf(tw, "  VSOCK SERVICE\tTARGET\tPORT\tRELAY PORT\tNODE\tTARGET CID\tALLOWED CIDS\n")
		}
		for _, s := range a.Status.VSOCKServices {
			cid := "-"
			if s.TargetCID != nil {
				cid = fmt.Sprint(*s.TargetCID)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%v\n", esc(s.Name), esc(s.VM), s.Port, s.RelayPort, dash(esc(s.Node)), cid, s.AllowedCIDs)
		}
		fmt.Fprintln(tw)
		tw = next(tw)
	}
	sort.Slice(fpns, func(i, j int) bool { return fpns[i].Name < fpns[j].Name })
	if len(fpns) == 0 {
		fmt.Fprintln(tw, "No FastPathNodes (is fastpath-agent running?).")
	}
	for _, n := range fpns {
		ready, reason := condStatus(n.Status.Conditions, fastpathv1alpha1.ReadyCondition)
		caps := n.Status.Capabilities
		ovs := "-"
		if caps.OVS != nil && caps.OVS.Reachable {
			ovs = esc(caps.OVS.Version)
		}
		fmt.Fprintf(tw, "FASTPATHNODE\tREADY\tREASON\tVHOST-NET\tVHOST-VSOCK\tTUN\tOVS\tKERNEL\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%t\t%t\t%s\t%s\n", esc(n.Name), esc(ready), esc(reason), caps.VhostNet, caps.VhostVSOCK, caps.Tun, ovs, esc(caps.Kernel))
		tw = next(tw)
		for _, c := range n.Status.Conditions {
			if c.Status != "True" && c.Message != "" {
				fmt.Fprintf(tw, "  %s=%s: %s\n", esc(c.Type), esc(string(c.Status)), esc(c.Message))
			}
		}
		for _, b := range n.Status.Bridges {
			atts := make([]string, len(b.Attachments))
			for i, a := range b.Attachments {
				atts[i] = esc(a)
			}
			fmt.Fprintf(tw, "  bridge %s\t%s\tMTU %d\tready=%t\t%s\t%s\n", esc(b.Name), esc(string(b.Datapath)), b.MTU, b.Ready, strings.Join(atts, ","), esc(b.Message))
		}
		for _, l := range n.Status.RelayListeners {
			fmt.Fprintf(tw, "  relay port %d\t%s/%s\t-> CID %d port %d\tallowed %v\n", l.Port, esc(l.Attachment), esc(l.Service), l.TargetCID, l.TargetPort, l.AllowedCIDs)
		}
	}
	return tw.Flush()
}

// esc returns s as it is when every rune of it is printable (unicode.IsPrint:
// no control characters such as ESC, newline, carriage return or tab, no
// format characters such as bidirectional overrides, no invalid UTF-8),
// else s quoted with Go escapes (strconv.Quote). Status strings come from
// guests (addresses, interface names, MACs the guest agent reports) and
// from messages that embed them, and a terminal would otherwise run their
// escape sequences or take their line breaks as new rows.
func esc(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeBenchmarkHeader prints a benchmark's phase, best throughput and
// speed-up, then its True conditions (how the run ended) or, while none is
// True (Pending), all of them, so the reason it waits shows.
func writeBenchmarkHeader(stdout io.Writer, b *fastpathv1alpha1.FastPathBenchmark) {
	fmt.Fprintf(stdout, "FastPathBenchmark %s/%s: phase %s", b.Namespace, b.Name, dash(esc(string(b.Status.Phase))))
	if b.Status.BestGbps != "" {
		fmt.Fprintf(stdout, ", best %s Gbit/s, speed-up %s", esc(b.Status.BestGbps), dash(esc(b.Status.Speedup)))
	}
	if b.Status.CPURatio != "" {
		fmt.Fprintf(stdout, ", CPU per byte %s of the baseline's (lower is better)", esc(b.Status.CPURatio))
	}
	fmt.Fprintln(stdout)
	anyTrue := slices.ContainsFunc(b.Status.Conditions, func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
	for _, cond := range b.Status.Conditions {
		if cond.Status == metav1.ConditionTrue || !anyTrue {
			fmt.Fprintf(stdout, "  %s=%s (%s) %s\n", esc(cond.Type), esc(string(cond.Status)), esc(cond.Reason), esc(cond.Message))
		}
	}
}
