package demo

import (
	"bytes"
	"io"
	"sync"

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

// heldWriter passes writes through, except between hold and release, when it
// buffers them (the emulation's lines during a kubectl command).
type heldWriter struct {
	mu   sync.Mutex
	w    io.Writer
	held bool
	buf  bytes.Buffer
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		return h.buf.Write(p)
	}
	return h.w.Write(p)
}

func (h *heldWriter) hold() {
	h.mu.Lock()
	h.held = true
	h.mu.Unlock()
}

func (h *heldWriter) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = false
	_, _ = h.w.Write(h.buf.Bytes())
	h.buf.Reset()
}
