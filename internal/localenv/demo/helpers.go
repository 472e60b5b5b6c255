package demo

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

type metaDuration = metav1.Duration

func clientInNamespace(ns string) client.ListOption { return client.InNamespace(ns) }

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: fastpathv1alpha1.GroupVersion.String(), Kind: kind}
}

func objectMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}
