package scheme

import (
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// New returns a scheme with the built-in Kubernetes types, apiextensions/v1,
// fastpath.io/v1alpha1, kubevirt.io/v1 and k8s.cni.cncf.io/v1. It panics only
// on a programming error (a type registered twice with different kinds).
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(fastpathv1alpha1.AddToScheme(s))
	utilruntime.Must(kubevirtv1.AddToScheme(s))
	utilruntime.Must(nadv1.AddToScheme(s))
	return s
}
