package main

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/internal/bench/results"
)

type metav1Condition = metav1.Condition

func jsonResults(doc results.Document) ([]byte, error) {
	var buf bytes.Buffer
	if err := results.Encode(&buf, doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
