package v1alpha1

// Condition types and reasons of the fastpath.io/v1alpha1 kinds. Reasons are
// UpperCamelCase (metav1.Condition requires it) and stable: alerts and
// dashboards match on them.

// FastPathAttachment condition types.
const (
	// ReadyCondition summarises every other condition: True when all are True (or
	// do not apply).
	ReadyCondition = "Ready"
	// NetworkAttachmentReadyCondition: the NetworkAttachmentDefinition exists with
	// the rendered netconf.
	NetworkAttachmentReadyCondition = "NetworkAttachmentReady"
	// VMsWiredCondition: every selected VM template carries the attachment's wiring.
	VMsWiredCondition = "VMsWired"
	// ColocatedCondition: every running VMI of the attachment is on one node.
	ColocatedCondition = "Colocated"
	// VSOCKReadyCondition: every vsock service has a relay port and a target CID.
	VSOCKReadyCondition = "VSOCKReady"
	// NodesReadyCondition: the FastPathNode of every node running a selected VM is Ready.
	NodesReadyCondition = "NodesReady"
	// SidecarGateOffCondition: no KubeVirt CR enables KubeVirt's Sidecar
	// feature gate, with which any VM author runs any image in their
	// virt-launcher Pod. Fastpath does not need the gate; a warning only,
	// Ready does not summarise it.
	SidecarGateOffCondition = "SidecarGateOff"
	// MovedTogetherCondition (spec.eviction MigrateTogether): True while the
	// member VMs are where their moves left them (reason Moved, or Idle when
	// none had to leave its node); False while a group move runs (Moving) or
	// when one cannot run (NoTargetNode, NotMigratable, MoveFailed). The fast path is down
	// for the VMs of a running move; Ready does not summarise it (the VMs
	// run, and a drain waiting for room is the admin's to resolve).
	MovedTogetherCondition = "MovedTogether"
)

// FastPathAttachment condition reasons.
const (
	// ReasonIdle: no member VM has had to leave its node (MovedTogether).
	ReasonIdle = "Idle"
	// ReasonMoving: a group move runs; the message names the VMs and nodes.
	ReasonMoving = "Moving"
	// ReasonMoved: the last group move ended with every VM on its new node.
	ReasonMoved = "Moved"
	// ReasonNoTargetNode: member VMs must leave a node but no other node can
	// take them all; the message names each node tried and why not.
	ReasonNoTargetNode = "NoTargetNode"
	// ReasonNotMigratable: member VMs must leave a node but cannot be
	// live-migrated: vsock mode Sibling gives them QEMU's vhost-user-vsock
	// device, which QEMU marks unmigratable (hw/virtio/vhost-user-vsock.c).
	// Nothing moves; a drain waits until each is restarted or stopped.
	ReasonNotMigratable = "NotMigratable"
	// ReasonMoveFailed: a migration of the move failed MaxMoveAttempts
	// times; the move is retried after a pause.
	ReasonMoveFailed = "MoveFailed"
	// ReasonMigrationReplaced (Event): a migration of one member that the
	// operator did not start was deleted and replaced by a move of the group.
	ReasonMigrationReplaced = "MigrationReplaced"
	// ReasonReady: everything is in place.
	ReasonReady = "Ready"
	// ReasonNotReady: a summarised condition is False; the message names it.
	ReasonNotReady = "NotReady"
	// ReasonInvalidSpec: the spec is wrong in a way the CRD cannot catch (a vsock
	// service naming a VM that exists and is not selected, a subnet overlapping
	// the pod network); the message names the field. A retry cannot fix it.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonNotRequested: the attachment does not ask for this part (no network, no vsock).
	ReasonNotRequested = "NotRequested"
	// ReasonNADCreated: the NetworkAttachmentDefinition is up to date.
	ReasonNADCreated = "NetworkAttachmentDefinitionReconciled"
	// ReasonNADFailed: creating or updating the NetworkAttachmentDefinition failed.
	ReasonNADFailed = "NetworkAttachmentDefinitionFailed"
	// ReasonNetworkRefused: the FastPathNetwork of spec.networkRef is missing,
	// does not admit the namespace, or the spec is outside its bounds; the
	// message names the field.
	ReasonNetworkRefused = "NetworkRefused"
	// ReasonSubnetConflict: spec.network.ipam.subnet overlaps the subnet of
	// another attachment on the same FastPathNetwork (in any namespace: the
	// network is one L2 segment) that came first (oldest creationTimestamp,
	// then name, then namespace); the message names it and both subnets. The
	// NAD is deleted, as for NetworkRefused (issue 39, item 4).
	ReasonSubnetConflict = "SubnetConflict"
	// ReasonNADConflict: a NetworkAttachmentDefinition of that name exists and is not ours.
	ReasonNADConflict = "NetworkAttachmentDefinitionConflict"
	// ReasonNoVMsSelected: the selector matches no VirtualMachine.
	ReasonNoVMsSelected = "NoVMsSelected"
	// ReasonWired: every selected VM is wired.
	ReasonWired = "Wired"
	// ReasonWiringFailed: applying the wiring to a VM failed.
	ReasonWiringFailed = "WiringFailed"
	// ReasonBindingNotRegistered: the KubeVirt CR does not register the
	// network binding plugin the attachment's datapath needs
	// (spec.configuration.network.binding.fastpath or .fastpath-macvtap);
	// the message says what is missing. No VM is wired until it is.
	ReasonBindingNotRegistered = "BindingPluginNotRegistered"
	// ReasonVMConflict: a VM is selected by an older attachment too, or already has
	// an interface or network of our name that is not ours.
	ReasonVMConflict = "VMConflict"
	// ReasonRestartRequired: a running VMI lacks wiring its VM template has.
	ReasonRestartRequired = "RestartRequired"
	// ReasonColocated: all running VMIs share one node.
	ReasonColocated = "Colocated"
	// ReasonNotColocated: running VMIs are on different nodes.
	ReasonNotColocated = "NotColocated"
	// ReasonPlacementNone: placement None, co-location is not checked.
	ReasonPlacementNone = "PlacementNone"
	// ReasonNoRunningVMs: no VM this attachment wired has a VMI yet (VMs that
	// another attachment holds do not count).
	ReasonNoRunningVMs = "NoRunningVMs"
	// ReasonVSOCKReady: every service has a relay port and a target CID.
	ReasonVSOCKReady = "RelayRoutesReady"
	// ReasonSiblingReady: mode Sibling and every service's target has a CID in the
	// group on a node whose agent runs the vhost-user vsock backend.
	ReasonSiblingReady = "SiblingRoutesReady"
	// ReasonNodeCannotSibling: mode Sibling and a selected VM runs on a node whose
	// FastPathNode does not report capabilities.vhostUserVSOCK (no agent, or
	// vhost-device-vsock missing there); the message names the VMs and nodes.
	ReasonNodeCannotSibling = "NodeCannotSibling"
	// ReasonSiblingCIDsExhausted: mode Sibling and the attachment selects more VMs
	// than the group's CID range holds.
	ReasonSiblingCIDsExhausted = "SiblingCIDsExhausted"
	// ReasonNoCID: a VMI has no vsock CID (KubeVirt VSOCK feature gate off, or the
	// VM not restarted since autoattachVSOCK was set).
	ReasonNoCID = "NoCID"
	// ReasonTargetNotFound: a service's target VirtualMachine does not exist (yet)
	// in the attachment's namespace; not a spec error, since manifests may create
	// the attachment before its VMs. The message names the services.
	ReasonTargetNotFound = "TargetNotFound"
	// ReasonTargetNotRunning: a service's target VM has no VMI.
	ReasonTargetNotRunning = "TargetNotRunning"
	// ReasonRelayPortsExhausted: no free relay port in the operator's range.
	ReasonRelayPortsExhausted = "RelayPortsExhausted"
	// ReasonNodesReady: every node running a selected VM is Ready.
	ReasonNodesReady = "NodesReady"
	// ReasonNodeNotReady: a node's FastPathNode is not Ready; the message says why.
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonNodeUnknown: a node running a selected VM has no FastPathNode (no agent there).
	ReasonNodeUnknown = "NodeUnknown"
	// ReasonDeleting: the attachment is being deleted and its wiring removed.
	ReasonDeleting = "Deleting"
	// ReasonOrphanUnwired (an Event on a VirtualMachine): the VM carried the
	// wiring of an attachment that no longer exists (deleted with its finalizer
	// removed by hand) and the operator removed it, or replaced it with the
	// wiring of an attachment that selects the VM now.
	ReasonOrphanUnwired = "OrphanUnwired"
	// ReasonSidecarGateOff: no KubeVirt CR lists the Sidecar feature gate.
	ReasonSidecarGateOff = "SidecarGateOff"
	// ReasonSidecarGateOn (SidecarGateOff=False and a Warning Event): a
	// KubeVirt CR lists the Sidecar feature gate in
	// spec.configuration.developerConfiguration.featureGates.
	ReasonSidecarGateOn = "SidecarGateOn"
	// ReasonRevoked (an Event on a VirtualMachine): the attachment's network
	// stopped admitting its namespace (spec.namespaceSelector) or was
	// deleted, and the operator unwired the VM and restarted its running
	// VMI, which carried the fast-path interface; or the attachment moved to
	// another bridge (the network's spec.bridge or the attachment's
	// spec.networkRef changed) and the operator restarted the running VMI
	// still on the old one.
	ReasonRevoked = "Revoked"
)

// FastPathBenchmark condition types.
const (
	// RunningCondition: the runner Job is running.
	RunningCondition = "Running"
	// SucceededCondition: results are in and every criterion is met.
	SucceededCondition = "Succeeded"
	// FailedCondition: the runner failed or a criterion was missed.
	FailedCondition = "Failed"
)

// FastPathBenchmark condition reasons.
const (
	// ReasonWaitingForAttachment: the attachment is missing or not Ready.
	ReasonWaitingForAttachment = "WaitingForAttachment"
	// ReasonEndpointNotFound: a client/server VM is not selected or has no VMI/IP.
	ReasonEndpointNotFound = "EndpointNotFound"
	// ReasonVMsApart: a pair's client and server VMs run on different nodes,
	// where no fast path joins them (it is node-local): the benchmark fails at
	// once instead of measuring nothing or waiting for a timeout.
	ReasonVMsApart = "VMsApart"
	// ReasonJobCreated: the runner Job was created.
	ReasonJobCreated = "JobCreated"
	// ReasonJobRunning: the runner Job is running.
	ReasonJobRunning = "JobRunning"
	// ReasonCriteriaMet: every success criterion is met.
	ReasonCriteriaMet = "CriteriaMet"
	// ReasonThresholdNotMet: a success criterion was missed; the message gives the numbers.
	ReasonThresholdNotMet = "ThresholdNotMet"
	// ReasonNetserverUnreachable: the runner could not reach netserver.
	ReasonNetserverUnreachable = "NetserverUnreachable"
	// ReasonRunnerFailed: the runner failed for another reason; the message has its error.
	ReasonRunnerFailed = "RunnerFailed"
	// ReasonResultsInvalid: the runner's output could not be parsed.
	ReasonResultsInvalid = "ResultsInvalid"
	// ReasonSSHKeyMissing: the Secret named by spec.sshKeySecretRef (key
	// ssh-privatekey) does not exist yet (VM mode); the benchmark waits for it.
	ReasonSSHKeyMissing = "SSHKeyMissing"
	// ReasonRunnerObjectConflict: the runner's ServiceAccount, Role or
	// RoleBinding ("<benchmark>-runner") or the results ConfigMap
	// ("<benchmark>-results") exists and this benchmark does not control it;
	// it is left exactly as it is and the message names it. The benchmark
	// stays Pending and goes on once the object is deleted.
	ReasonRunnerObjectConflict = "RunnerObjectConflict"
	// ReasonUnsupported: the spec asks for something the controller cannot run
	// (e.g. VSOCK tests, or client and server pods pinned to different nodes); the
	// message says what. A retry cannot fix it; a spec change can.
	ReasonUnsupported = "Unsupported"
	// ReasonWaitingForCompareTo: the FastPathBenchmark or ConfigMap of
	// spec.compareTo does not exist yet, or the benchmark has not finished;
	// the run starts once it has (Pending).
	ReasonWaitingForCompareTo = "WaitingForCompareTo"
	// ReasonCompareToInvalid: spec.compareTo names a run without usable
	// results (a benchmark that failed before it measured, the benchmark
	// itself, a ConfigMap without a results.json that decodes and
	// validates); the message says which. A retry cannot fix it (Failed).
	ReasonCompareToInvalid = "CompareToInvalid"
)

// FastPathNode condition types.
const (
	// BridgesReadyCondition: every wanted bridge exists with the wanted MTU.
	BridgesReadyCondition = "BridgesReady"
	// VSOCKRelayReadyCondition: the relay serves every route for this node.
	VSOCKRelayReadyCondition = "VSOCKRelayReady"
	// SiblingBackendsReadyCondition: every vhost-device-vsock of a Sibling-mode
	// attachment runs.
	SiblingBackendsReadyCondition = "SiblingBackendsReady"
)

// FastPathNode condition reasons.
const (
	// ReasonBridgesReady: every bridge is ready.
	ReasonBridgesReady = "BridgesReady"
	// ReasonBridgeFailed: a bridge could not be created or configured.
	ReasonBridgeFailed = "BridgeFailed"
	// ReasonBridgeConflict: two FastPathNetworks name one spec.bridge; the
	// bridge is left unchanged.
	ReasonBridgeConflict = "BridgeConflict"
	// ReasonOVSUnreachable: a FastPathNetwork has datapath OVS and OVSDB does not answer.
	ReasonOVSUnreachable = "OVSUnreachable"
	// ReasonNoBridgesWanted: no FastPathNetwork exists, so no bridge is wanted.
	ReasonNoBridgesWanted = "NoBridgesWanted"
	// ReasonRelayReady: the relay serves every route.
	ReasonRelayReady = "RelayReady"
	// ReasonRelayFailed: a relay listener could not be opened.
	ReasonRelayFailed = "RelayFailed"
	// ReasonVhostVSOCKMissing: /dev/vhost-vsock is absent (vhost_vsock module not loaded).
	ReasonVhostVSOCKMissing = "VhostVSOCKMissing"
	// ReasonNoRoutes: no vsock route for this node.
	ReasonNoRoutes = "NoRoutes"
	// ReasonSiblingBackendsRunning: every vhost-device-vsock the node needs runs.
	ReasonSiblingBackendsRunning = "SiblingBackendsRunning"
	// ReasonSiblingBackendFailed: a vhost-device-vsock exited and is being
	// restarted, or could not be started; the message has its error.
	ReasonSiblingBackendFailed = "SiblingBackendFailed"
	// ReasonSiblingDevicePluginFailed: the device plugin of
	// vsock.fastpath.io/sibling is not registered with kubelet, so Sibling
	// VMs' launchers cannot get their vhost-user socket.
	ReasonSiblingDevicePluginFailed = "SiblingDevicePluginFailed"
	// ReasonNoSiblingBackends: no attachment in mode Sibling has a member VM
	// on this node (or none exists).
	ReasonNoSiblingBackends = "NoSiblingBackends"
	// ReasonSiblingGroupsOverCap: a Sibling attachment with a member VM on
	// this node gets no vhost-device-vsock because the node's cap on groups
	// (agent --sibling-max-groups) or its namespace's cap
	// (--sibling-max-groups-per-namespace) is reached; the message names the
	// attachments and the cap.
	ReasonSiblingGroupsOverCap = "SiblingGroupsOverCap"
	// ReasonNodeLabelFailed: the agent could not set (or remove) the Node label
	// VhostUserVSOCKNodeLabel, so Sibling VMs are not steered to (or away
	// from) this node.
	ReasonNodeLabelFailed = "NodeLabelFailed"
)

// FastPathNetwork condition types.
const (
	// TuningReadyCondition: every node serving the network has a
	// recommendation from its latest sweep (spec.tuning.mode Recommend or Apply).
	TuningReadyCondition = "TuningReady"
)

// FastPathNetwork tuning reasons (condition TuningReady and Events).
const (
	// ReasonTuningOff: spec.tuning.mode is Off; nothing is measured or applied.
	ReasonTuningOff = "TuningOff"
	// ReasonNoNodes: no Ready FastPathNode serves the network yet.
	ReasonNoNodes = "NoNodes"
	// ReasonSweeping: a node is being measured; the message names it.
	ReasonSweeping = "Sweeping"
	// ReasonRecommended: every node has a recommendation.
	ReasonRecommended = "Recommended"
	// ReasonApplied: every node has a recommendation and new attachments
	// default to status.tuning.applied.
	ReasonApplied = "Applied"
	// ReasonAllCandidatesFailed: on some node no candidate succeeded; the
	// message names the node, and nothing is recommended there.
	ReasonAllCandidatesFailed = "AllCandidatesFailed"
	// ReasonSweepFailed: the sweep of a node cannot go on: a
	// FastPathBenchmark of one of its names exists and the network does not
	// control it; the message names it. (Steps that exceed the sweep's bound
	// fail as evidence, not with this reason.)
	ReasonSweepFailed = "SweepFailed"
)
