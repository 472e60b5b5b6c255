// Command fastpath-cluster runs a REAL single-node Kubernetes cluster on this
// machine (test/localenv/cluster): `up` (make cluster), `down` (make
// cluster-down) and `install` (make cluster-install: helm install of
// charts/fastpath with the local images, or kubectl apply -k config/default).
// It only parses flags; the logic lives in test/localenv/cluster.
package main
