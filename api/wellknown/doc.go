// Package wellknown is the one home of the names and limits that more than
// one part of Fastpath must agree on: the API (api/v1alpha1), the operator,
// the node agent, the CNI plugin (api/netconf and the datapaths) and
// the domain hook's tuning. Each value is written here once; the others
// import it instead of repeating it, so no test has to hold copies equal.
//
// It is a leaf: it imports nothing, so that the plugin binary that the
// runtime executes for every ADD links no API machinery by importing it
// (docs/architecture_test.go checks both).
//
// controller-gen reads validation markers as literals, so the MTU bounds in
// the +kubebuilder:validation markers of api/v1alpha1 repeat MinMTU and
// MaxMTU; api/v1alpha1's TestCRDBoundsAreWellKnown holds them to these.
package wellknown
