package nodeagent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/node/probe"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// List limits of FastPathNodeStatus (the CRD's MaxItems).
const (
	maxBridges         = 64
	maxRelayListeners  = 1024
	maxSysctls         = 16
	maxSiblingBackends = 256
)

// maxMessageParts bounds how many problems one condition message lists.
const maxMessageParts = 5

// EmulatedTransportLabel starts the note that ends the VSOCKRelayReady
// message when the relay's transport stands in for AF_VSOCK:
// " (EMULATED vsock transport, not AF_VSOCK: <vsock.EmulationNote>)".
const EmulatedTransportLabel = "EMULATED vsock transport, not AF_VSOCK"

// transportNote is the note that labels the relay's messages when transport
// is not the kernel's AF_VSOCK, else "".
func transportNote(transport vsock.Transport) string {
	if n := vsock.EmulationNote(transport); n != "" {
		return " (" + EmulatedTransportLabel + ": " + n + ")"
	}
	return ""
}

// computeStatus derives the FastPathNode status from what one reconcile
// observed; conditions keep their LastTransitionTime when their status does
// not change.
func (r *Reconciler) computeStatus(fpn *fastpathv1alpha1.FastPathNode, obs *observed) fastpathv1alpha1.FastPathNodeStatus {
	bridges := slices.Clone(obs.bridges)
	slices.SortFunc(bridges, func(a, b fastpathv1alpha1.BridgeStatus) int { return cmp.Compare(a.Name, b.Name) })
	st := fastpathv1alpha1.FastPathNodeStatus{
		Capabilities:    obs.caps,
		Bridges:         capList(bridges, maxBridges),
		RelayListeners:  capList(obs.listeners, maxRelayListeners),
		RelayLimits:     obs.relayLimit,
		Sysctls:         capList(obs.sysctls, maxSysctls),
		SiblingBackends: capList(obs.siblings, maxSiblingBackends),
		CNIBinary:       obs.cni,
		AgentVersion:    r.AgentVersion,
		Conditions:      slices.Clone(fpn.Status.Conditions),
	}
	gen := fpn.Generation
	setBridgesReadyCondition(&st.Conditions, obs, gen)
	setVSOCKRelayReadyCondition(&st.Conditions, obs, gen, transportNote(r.RelayTransport))
	setSiblingBackendsReadyCondition(&st.Conditions, obs, gen, r.Siblings != nil || len(obs.siblings) > 0)
	setReadyCondition(&st.Conditions, obs, gen)
	return st
}

func capList[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// setBridgesReadyCondition: False with BridgeConflict when a bridge name is
// wanted with two datapaths, else OVSUnreachable when an OVS bridge is wanted
// and OVSDB does not answer, else BridgeFailed when a bridge could not be
// ensured; True with NoBridgesWanted or BridgesReady otherwise.
func setBridgesReadyCondition(conds *[]metav1.Condition, obs *observed, gen int64) {
	c := metav1.Condition{Type: fastpathv1alpha1.BridgesReadyCondition, ObservedGeneration: gen}
	var conflictMsgs, errMsgs []string
	for _, cf := range obs.conflicts {
		conflictMsgs = append(conflictMsgs, cf.Message())
	}
	ovsDown := false
	for _, err := range obs.bridgeErrs {
		errMsgs = append(errMsgs, err.Error())
		ovsDown = ovsDown || errors.Is(err, bridge.ErrOVSUnreachable)
	}
	switch {
	case len(conflictMsgs) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, fastpathv1alpha1.ReasonBridgeConflict
		c.Message = joinMessages(append(conflictMsgs, errMsgs...))
	case ovsDown:
		c.Status, c.Reason = metav1.ConditionFalse, fastpathv1alpha1.ReasonOVSUnreachable
		msgs := errMsgs
		if o := obs.caps.OVS; o != nil && !o.Reachable && o.Message != "" {
			msgs = append([]string{o.Message}, errMsgs...)
		}
		c.Message = joinMessages(msgs)
	case len(errMsgs) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, fastpathv1alpha1.ReasonBridgeFailed
		c.Message = joinMessages(errMsgs)
	case len(obs.desired) == 0:
		c.Status, c.Reason = metav1.ConditionTrue, fastpathv1alpha1.ReasonNoBridgesWanted
		c.Message = "no FastPathNetwork asks for a bridge"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, fastpathv1alpha1.ReasonBridgesReady
		parts := make([]string, len(obs.desired))
		for i, d := range obs.desired {
			parts[i] = fmt.Sprintf("%s (%s, MTU %d)", d.Name, d.Datapath, d.MTU)
		}
		c.Message = "bridges ready: " + joinMessages(parts)
	}
	meta.SetStatusCondition(conds, c)
}

// setVSOCKRelayReadyCondition: False with RelayFailed when a route is invalid
// or its listener could not be opened, else VhostVSOCKMissing when routes
// exist but /dev/vhost-vsock does not (real transport only; programRelay
// then opens no listener); True with
// NoRoutes or RelayReady otherwise. note (of transportNote) ends every
// message but VhostVSOCKMissing's; a transport with a note is emulated.
func setVSOCKRelayReadyCondition(conds *[]metav1.Condition, obs *observed, gen int64, note string) {
	c := metav1.Condition{Type: fastpathv1alpha1.VSOCKRelayReadyCondition, ObservedGeneration: gen}
	var problems []string
	problems = append(problems, obs.routeProbs...)
	if obs.relayErr != nil {
		problems = append(problems, obs.relayErr.Error())
	}
	emulated := note != ""
	switch {
	case len(problems) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, fastpathv1alpha1.ReasonRelayFailed
		c.Message = joinMessages(problems) + note
	case len(obs.routes) > 0 && !obs.caps.VhostVSOCK && !emulated:
		c.Status, c.Reason = metav1.ConditionFalse, fastpathv1alpha1.ReasonVhostVSOCKMissing
		c.Message = fmt.Sprintf("%d vsock routes target VMs on this node but %s; the relay opens no listener until it is there", len(obs.routes), probe.MsgVhostVSOCKMissing)
	case len(obs.routes) == 0:
		c.Status, c.Reason = metav1.ConditionTrue, fastpathv1alpha1.ReasonNoRoutes
		c.Message = "no vsock service targets a VM on this node" + note
		if !obs.caps.VhostVSOCK && !emulated {
			c.Message += "; note: " + probe.MsgVhostVSOCKMissing
		}
	default:
		c.Status, c.Reason = metav1.ConditionTrue, fastpathv1alpha1.ReasonRelayReady
		ports := make([]string, len(obs.routes))
		for i, rt := range obs.routes {
			ports[i] = fmt.Sprint(rt.ListenPort)
		}
		c.Message = fmt.Sprintf("relay serves %d routes on ports %s", len(obs.routes), joinLimited(ports, ", ")) + note
	}
	meta.SetStatusCondition(conds, c)
}

// setReadyCondition summarises BridgesReady, VSOCKRelayReady and the CNI
// install: True when all are fine. Missing vhost-net (while bridges are
// wanted) or tun and failed sysctl tuning are warnings in the message; they
// slow the node down but do not stop VMs from being wired.
func setReadyCondition(conds *[]metav1.Condition, obs *observed, gen int64) {
	c := metav1.Condition{Type: fastpathv1alpha1.ReadyCondition, ObservedGeneration: gen}
	var notReady []string
	for _, t := range []string{fastpathv1alpha1.BridgesReadyCondition, fastpathv1alpha1.VSOCKRelayReadyCondition, fastpathv1alpha1.SiblingBackendsReadyCondition} {
		if sub := meta.FindStatusCondition(*conds, t); sub != nil && sub.Status != metav1.ConditionTrue {
			notReady = append(notReady, fmt.Sprintf("%s is %s (%s): %s", t, sub.Status, sub.Reason, sub.Message))
		}
	}
	if obs.cniErr != nil {
		notReady = append(notReady, "CNI binary not installed: "+obs.cniErr.Error())
	}
	var warnings []string
	if !obs.caps.VhostNet && len(obs.desired) > 0 {
		warnings = append(warnings, probe.MsgVhostNetMissing)
	}
	if !obs.caps.Tun {
		warnings = append(warnings, probe.MsgTunMissing)
	}
	if wantsDatapath(obs.desired, fastpathv1alpha1.DatapathMacvtap) && !slices.Contains(obs.caps.DatapathTypes, fastpathv1alpha1.DatapathMacvtap) {
		warnings = append(warnings, probe.MsgMacvtapMissing)
	}
	if obs.sysctlErr != nil {
		warnings = append(warnings, "sysctl tuning failed: "+obs.sysctlErr.Error())
	}
	if len(notReady) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, fastpathv1alpha1.ReasonNotReady
		c.Message = strings.Join(append(notReady, warnings...), "; ")
	} else {
		c.Status, c.Reason = metav1.ConditionTrue, fastpathv1alpha1.ReasonReady
		c.Message = strings.Join(append([]string{"node ready"}, warnings...), "; warning: ")
	}
	meta.SetStatusCondition(conds, c)
}

// joinMessages joins at most maxMessageParts parts with "; " and says how
// many were left out.
func joinMessages(parts []string) string { return joinLimited(parts, "; ") }

func joinLimited(parts []string, sep string) string {
	if len(parts) <= maxMessageParts {
		return strings.Join(parts, sep)
	}
	return strings.Join(parts[:maxMessageParts], sep) + fmt.Sprintf("%sand %d more", sep, len(parts)-maxMessageParts)
}
