// Package bindingplugin is fastpath-operator's registrar of Fastpath's
// KubeVirt network binding plugins (internal/vm/kubevirtcr): with
// --register-binding-plugins it writes their entries into the one KubeVirt
// CR it is told (--kubevirt, default kubevirt/kubevirt) when the operator
// starts and when the CR is created (KubeVirt installed, or reinstalled,
// after Fastpath). It does not write them back when someone removes them
// later: that is the admin's act, or the chart's pre-delete hook
// (--unregister-binding-plugins) running while this operator still does;
// the attachments then report BindingPluginNotRegistered. It patches
// nothing else: the chart grants get and patch on kubevirts of that one
// name only (a ClusterRole with resourceNames).
package bindingplugin
