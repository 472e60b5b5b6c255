// Command fastpath-cluster runs a REAL single-node Kubernetes cluster on this
// machine (internal/localenv/cluster): `up` (make cluster), `down` (make
// cluster-down) and `install` (make cluster-install: helm install of
// charts/fastpath with the local images, or kubectl apply -k config/default).
// It only parses flags; the logic lives in internal/localenv/cluster.
package main
