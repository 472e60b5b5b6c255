package main

import (
	"fmt"
	"os"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fastpath-io/fastpath/bench/jobrunner"
)

// newSink returns the sink of the results ConfigMap ns/name for run runID.
// The API server is found from $KUBECONFIG when it is set (a list of files,
// as kubectl reads it; the demo sets it), else from the in-cluster
// configuration of the runner Job's ServiceAccount.
func newSink(ns, name, runID string) (*jobrunner.ConfigMapSink, error) {
	env := clientcmd.RecommendedConfigPathEnvVar
	cfg, err := rest.InClusterConfig()
	if err != nil {
		err = fmt.Errorf("failed to load the in-cluster configuration (set $%s outside a cluster): %w", env, err)
	}
	if os.Getenv(env) != "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig(); err != nil {
			err = fmt.Errorf("failed to load the kubeconfig from $%s: %w", env, err)
		}
	}
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "fastpath-bench"
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the Kubernetes client: %w", err)
	}
	return &jobrunner.ConfigMapSink{Client: c, Namespace: ns, Name: name, RunID: runID}, nil
}
