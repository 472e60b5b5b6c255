package demo

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
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

// refusedReasons are the condition reasons with which the operator refuses an
// attachment until its spec (or the admin's FastPathNetwork) changes: waiting
// longer cannot help (api/v1alpha1/conditions.go).
var refusedReasons = []string{
	fastpathv1alpha1.ReasonInvalidSpec,
	fastpathv1alpha1.ReasonNetworkRefused,
	fastpathv1alpha1.ReasonNADConflict,
	fastpathv1alpha1.ReasonVMConflict,
}

// refusal returns an error naming the attachment and each condition with which
// the operator refused its current generation (type, reason and message), or
// nil when none did. The demo's waits call it so that a refused attachment
// fails the demo at once, with the operator's words, instead of at a timeout.
func refusal(a *fastpathv1alpha1.FastPathAttachment) error {
	var why []string
	for _, c := range a.Status.Conditions {
		if c.Status == metav1.ConditionFalse && c.ObservedGeneration == a.Generation && slices.Contains(refusedReasons, c.Reason) {
			why = append(why, fmt.Sprintf("%s=False (%s): %s", c.Type, c.Reason, c.Message))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("the operator refused FastPathAttachment %s/%s: %s", a.Namespace, a.Name, strings.Join(why, "; "))
}
