// Package bindingplugin is fastpath-operator's registrar of Fastpath's
// KubeVirt network binding plugins (internal/vm/bindingplugin): with
// --register-binding-plugins it keeps their entries in the one KubeVirt CR
// it is told (--kubevirt, default kubevirt/kubevirt), writing them when
// the operator starts, when the CR appears (KubeVirt installed after
// Fastpath) and whenever someone changes the CR's spec, so a KubeVirt
// reinstall or an edit that dropped them heals. It patches nothing else:
// the chart grants patch on that one object only (a Role with resourceNames).
package bindingplugin
