package main

import (
	"fmt"
	"os"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fastpath-io/fastpath/internal/bench/benchjob"
)

// restConfig returns the API server configuration: from $KUBECONFIG when
// it is set (a list of files, as kubectl reads it; the demo sets it), else
// the in-cluster configuration of the runner Job's ServiceAccount.
func restConfig() (*rest.Config, error) {
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("failed to load the kubeconfig from $%s: %w", clientcmd.RecommendedConfigPathEnvVar, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load the in-cluster configuration (set $%s outside a cluster): %w", clientcmd.RecommendedConfigPathEnvVar, err)
	}
	return cfg, nil
}

// newSink returns the sink of the results ConfigMap ns/name for run runID,
// with a core/v1 client of restConfig.
func newSink(ns, name, runID string) (*benchjob.ConfigMapSink, error) {
	cfg, err := restConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "fastpath-bench"
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the Kubernetes client: %w", err)
	}
	return &benchjob.ConfigMapSink{Client: c, Namespace: ns, Name: name, RunID: runID}, nil
}
