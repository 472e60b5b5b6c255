# Fastpath — make targets in kubebuilder's style (`make help`).
#
# Every target that needs tools or apt packages runs hack/setup.sh first, which is
# idempotent and quick when everything is present, so `make demo` and `make test`
# work as the first command on a fresh Debian bookworm machine (as root).

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(shell pwd)
BIN := $(ROOT)/bin
export GOFLAGS ?= -mod=mod
export KUBEBUILDER_ASSETS ?= $(BIN)
CONTROLLER_GEN := $(BIN)/controller-gen
GO_TEST_FLAGS ?= -count=1 -timeout 60m
IMG ?= ghcr.io/fastpath-io/fastpath:dev
BINARIES := fastpath fastpath-operator fastpath-agent fastpath-bench fastpath-domain-hook kubectl-fastpath fastpath-demo fastpath-cluster

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

.PHONY: setup
setup: ## Install apt packages and build tools into bin/ (root; idempotent).
	@bash hack/setup.sh

##@ Development

.PHONY: fmt
fmt: ## Run gofmt on the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: vet ## gofmt check and go vet (and staticcheck, built into bin/ on first use).
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "files above are not gofmt-formatted"; exit 1; }
	@test -x $(BIN)/staticcheck || GOBIN=$(BIN) go install honnef.co/go/tools/cmd/staticcheck@v0.6.1
	$(BIN)/staticcheck ./...

.PHONY: generate
generate: setup ## Generate deepcopy code (controller-gen object).
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: setup ## Generate CRDs and RBAC into config/, and copy the CRDs into the Helm chart.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=fastpath-operator paths="{./controllers/attachment/...,./controllers/benchmark/...,./internal/platform/metricsauth/...}" output:rbac:artifacts:config=config/rbac
	cp config/crd/bases/*.yaml charts/fastpath/crds/
	$(CONTROLLER_GEN) rbac:roleName=fastpath-agent paths="{./controllers/node/...,./internal/platform/metricsauth/...}" output:rbac:artifacts:config=config/rbac/agent
	cp config/rbac/role.yaml charts/fastpath/files/operator-role.yaml
	cp config/rbac/agent/role.yaml charts/fastpath/files/agent-role.yaml
	cp config/rbac/tenant/roles.yaml charts/fastpath/files/tenant-roles.yaml

.PHONY: verify
verify: generate manifests ## Regenerate code and manifests and fail if anything changed.
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts)" || { git status --porcelain -- api config charts; echo "untracked generated files: commit them"; exit 1; }

##@ Build

.PHONY: build
build: ## Build every binary into bin/.
	@mkdir -p $(BIN)
	@for b in $(BINARIES); do \
	  if [ -d cni/cmd/$$b ]; then pkg=./cni/cmd/$$b; elif [ -d cmd/$$b ]; then pkg=./cmd/$$b; else continue; fi; \
	  echo "go build -o bin/$$b $$pkg"; CGO_ENABLED=0 go build -trimpath -o $(BIN)/$$b $$pkg; \
	done

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine; none on the dev machines).
	docker build -t $(IMG) .

.PHONY: images
images: setup ## Build the OCI images (pause, operator, agent, bench, domain-hook) without a Docker daemon into _out/images/ (docs/images.md).
	go run ./cmd/fastpath-images build $(IMAGES)

.PHONY: images-import
images-import: ## Import _out/images/*.tar into the containerd at CONTAINERD_ADDRESS=<socket> (namespace k8s.io).
	@test -n "$(CONTAINERD_ADDRESS)" || { echo "images-import: set CONTAINERD_ADDRESS to the containerd socket"; exit 2; }
	go run ./cmd/fastpath-images import --address $(CONTAINERD_ADDRESS) $(IMAGES)

##@ Test

.PHONY: test
test: setup build vet verify ## Run every test: unit, envtest, datapath (root), e2e (namespace guests, then real QEMU guests).
	@# One package at a time (-p 1): the root datapath tests share this node's Open
	@# vSwitch, network namespaces and both CPUs, and netperf in one package starved
	@# ovs-vswitchd under another's 20 concurrent CNI ADDs. The soak, which SIGKILLs
	@# plugins in the middle of OVS port changes, runs last.
	go test $(GO_TEST_FLAGS) -p 1 $$(go list ./... | grep -v /internal/testing/soak)
	go test $(GO_TEST_FLAGS) ./internal/testing/soak/...
	FASTPATH_GUESTS=qemu go test $(GO_TEST_FLAGS) ./e2e/...

.PHONY: soak
soak: setup build ## Fault-injection soak: SIGKILLed plugin, operator and agent, restarted kube-apiserver; summary per part, exit 1 on any loss (root; SOAK_FLAGS).
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/fastpath-soak ./cmd/fastpath-soak
	$(BIN)/fastpath-soak --plugin $(BIN)/fastpath --operator $(BIN)/fastpath-operator --agent $(BIN)/fastpath-agent $(SOAK_FLAGS)

.PHONY: e2e
e2e: setup build ## Run the e2e suite (embedded local environment, or KUBECONFIG's cluster). FASTPATH_GUESTS=qemu for real VMs.
	go test $(GO_TEST_FLAGS) -v ./e2e/... -ginkgo.v

.PHONY: bench
bench: setup build ## Run the benchmarks: local node datapaths, CNI latency, relay cost, operator scale.
	@mkdir -p _out/bench
	FASTPATH_BENCH_DIR=$(ROOT)/_out/bench go test -count=1 -run '^$$' -bench . -benchtime=1x -timeout 60m $$(go list ./... | grep -v /e2e)
	@if [ -x $(BIN)/fastpath-bench ] && $(BIN)/fastpath-bench local --help >/dev/null 2>&1; then \
	  $(BIN)/fastpath-bench local --out _out/bench $(if $(FULL),--full,); fi

##@ Cluster (a REAL single-node Kubernetes on this machine, root; docs/install.md)

CLUSTER_DIR ?= $(ROOT)/_out/cluster
CLUSTER := $(BIN)/fastpath-cluster --dir $(CLUSTER_DIR) --bin-dir $(BIN) --images-dir $(ROOT)/_out/images

.PHONY: cluster
cluster: setup build images ## Start a real single-node cluster (kubelet, containerd, Multus; no KubeVirt) under _out/cluster; KUBECONFIG=_out/cluster/kubeconfig.
	$(CLUSTER) up

.PHONY: cluster-down
cluster-down: ## Stop the cluster and remove everything it made (containers, shims, mounts, cgroups, netns, links, processes).
	@test -x $(BIN)/fastpath-cluster || CGO_ENABLED=0 go build -trimpath -o $(BIN)/fastpath-cluster ./cmd/fastpath-cluster
	$(CLUSTER) down

.PHONY: cluster-install
cluster-install: build ## helm install Fastpath on the cluster with the local images (KUSTOMIZE=1: kubectl apply -k config/default).
	$(CLUSTER) install $(if $(KUSTOMIZE),--kustomize,)

##@ Demo

.PHONY: demo
demo: setup build ## Run Fastpath's whole job on an embedded local environment (root). FULL=1 for the papers' matrix, GUESTS=qemu for real VMs.
	$(BIN)/kubectl-fastpath demo $(if $(FULL),--full,) $(if $(GUESTS),--guests=$(GUESTS),)
