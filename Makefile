# Fastpath — make targets in kubebuilder's style (`make help`).
#
# Every target that needs tools or apt packages runs hack/setup.sh first with only the
# parts it uses (core, tools, cluster, guests, vsock: see the script), which is
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
# The images' tag (make push, make docker-build): by default the chart's appVersion, so
# `--set image.registry=<REGISTRY>` alone installs them by tag, and make push's
# _out/images/values-digests.yaml by digest.
TAG ?= $(shell awk '$$1 == "appVersion:" { gsub(/"/, "", $$2); print $$2 }' $(ROOT)/charts/fastpath/Chart.yaml)
BINARIES := fastpath fastpath-ovs-plugin fastpath-operator fastpath-agent fastpath-bench fastpath-domain-hook fastpath-vsock-backend kubectl-fastpath
# The harness's one binary, from the e2e/ module (docs/architecture.md): never shipped.
# fastpath-dev demo|cluster|images|soak.
HARNESS_BINARIES := fastpath-dev
DEV := $(BIN)/fastpath-dev
# go in the harness module e2e/ (its own go.mod, replace => ../). An environment
# variable for go goes after it: IN_HARNESS VAR=value go test ...
IN_HARNESS := cd $(ROOT)/e2e &&
GO_HARNESS := $(IN_HARNESS) go

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

.PHONY: setup
setup: ## Install apt packages and build tools into bin/: every part but kubevirt (root; idempotent).
	@bash hack/setup.sh

# setup-<parts>: hack/setup.sh with the parts named, '+' between them (setup-core+tools).
# setup-kubevirt builds KubeVirt from source into bin/kubevirt/<version>/ (docs/kubevirt.md).
setup-%:
	@bash hack/setup.sh $(subst +, ,$*)

##@ Development

.PHONY: fmt
fmt: ## Run gofmt on the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet on the product and the harness module (e2e/).
	go vet ./...
	$(GO_HARNESS) vet ./...

.PHONY: lint
lint: vet lint-workflows ## gofmt check, go vet, actionlint on the workflows (and staticcheck, built into bin/ on first use).
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "files above are not gofmt-formatted"; exit 1; }
	@test -x $(BIN)/staticcheck || GOBIN=$(BIN) go install honnef.co/go/tools/cmd/staticcheck@v0.6.1
	$(BIN)/staticcheck ./...
	cd e2e && $(BIN)/staticcheck ./...

# actionlint checks the GitHub Actions workflows (.github/workflows). Pinned here
# like staticcheck, not in hack/tools: adding it there moves go-runewidth under
# kubectl and helm.
ACTIONLINT_VERSION := v1.7.7

.PHONY: lint-workflows
lint-workflows: ## Check .github/workflows with actionlint (built into bin/ on first use).
	@test -x $(BIN)/actionlint-$(ACTIONLINT_VERSION) || { GOBIN=$(BIN) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION) && mv $(BIN)/actionlint $(BIN)/actionlint-$(ACTIONLINT_VERSION); }
	$(BIN)/actionlint-$(ACTIONLINT_VERSION) .github/workflows/*.yaml

.PHONY: generate
generate: setup-core+tools ## Generate deepcopy code (controller-gen object).
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: setup-core+tools ## Generate CRDs and RBAC into config/, and copy the CRDs into the Helm chart.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=fastpath-operator paths="{./controllers/attachment/...,./controllers/benchmark/...,./controllers/tuning/...,./internal/platform/metricsauth/...}" output:rbac:artifacts:config=config/rbac
	@# The chart renders its CRDs from files/crds (templates/crds.yaml), so helm upgrade updates them.
	mkdir -p charts/fastpath/files/crds && rm -f charts/fastpath/files/crds/*.yaml
	cp config/crd/bases/*.yaml charts/fastpath/files/crds/
	$(CONTROLLER_GEN) rbac:roleName=fastpath-agent paths="{./controllers/nodeagent/...,./internal/platform/metricsauth/...}" output:rbac:artifacts:config=config/rbac/agent
	cp config/rbac/role.yaml charts/fastpath/files/operator-role.yaml
	cp config/rbac/agent/role.yaml charts/fastpath/files/agent-role.yaml
	cp config/rbac/tenant/roles.yaml charts/fastpath/files/tenant-roles.yaml
	@# config/default (kubectl apply -k) is the chart rendered with its defaults, so the two never drift.
	@# helm template knows no kinds: --api-versions says the cluster serves ValidatingAdmissionPolicy v1,
	@# which the chart requires; kubectl apply of the result fails where it does not (docs/install.md).
	@# crds.enabled=false: kustomize takes the CRDs from config/crd, controller-gen's own bytes.
	@# --no-hooks: kubectl apply has no pre-delete, so the Job that unregisters the binding plugins
	@# would run at once; kustomize users unregister by hand (docs/install.md#the-binding-plugin).
	{ echo "# Generated by make manifests: helm template of charts/fastpath (default values, CRDs from config/crd) into fastpath-system. Do not edit;"; \
	  echo "# customise with a kustomize overlay (docs/install.md)."; \
	  $(BIN)/helm template fastpath charts/fastpath --namespace fastpath-system --no-hooks --set crds.enabled=false \
	    --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy; } > config/default/fastpath.yaml
	{ echo "# Generated by make manifests: the CRDs of bases/."; echo "apiVersion: kustomize.config.k8s.io/v1beta1"; \
	  echo "kind: Kustomization"; echo "resources:"; for f in config/crd/bases/*.yaml; do echo "- bases/$$(basename $$f)"; done; } > config/crd/kustomization.yaml

.PHONY: verify
verify: generate manifests ## Regenerate code and manifests and fail if anything changed.
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts)" || { git status --porcelain -- api config charts; echo "untracked generated files: commit them"; exit 1; }

##@ Build

.PHONY: build
build: ## Build every binary into bin/: the product's, then the harness's (e2e/cmd).
	@mkdir -p $(BIN)
	@for b in $(BINARIES); do \
	  if [ -d cni/cmd/$$b ]; then pkg=./cni/cmd/$$b; elif [ -d bench/cmd/$$b ]; then pkg=./bench/cmd/$$b; elif [ -d cmd/$$b ]; then pkg=./cmd/$$b; else continue; fi; \
	  echo "go build -o bin/$$b $$pkg"; CGO_ENABLED=0 go build -trimpath -o $(BIN)/$$b $$pkg; \
	done
	@for b in $(HARNESS_BINARIES); do \
	  echo "go build -o bin/$$b ./e2e/cmd/$$b"; (cd e2e && CGO_ENABLED=0 go build -trimpath -o $(BIN)/$$b ./cmd/$$b); \
	done

# The Dockerfile's image targets (a test checks this list against the Dockerfile).
# docker-build tags them <DOCKER_REGISTRY>/fastpath-<target>:<TAG>, the chart's names.
DOCKER_TARGETS := operator agent bench domain-hook vsock-backend
DOCKER_REGISTRY ?= $(or $(REGISTRY),ghcr.io/fastpath-io)

.PHONY: docker-build
docker-build: ## Build every Dockerfile target (operator, agent, bench, domain-hook, vsock-backend) as <DOCKER_REGISTRY>/fastpath-<target>:TAG with a Docker engine; says SKIPPED and succeeds without one (make images builds them daemonless).
	@if ! command -v docker >/dev/null 2>&1; then \
	  echo "docker-build: SKIPPED: no docker command on PATH (make images builds the same images without a daemon)"; exit 0; fi; \
	if ! docker info >/dev/null 2>&1; then \
	  echo "docker-build: SKIPPED: docker cannot reach a Docker engine (make images builds the same images without a daemon)"; exit 0; fi; \
	for t in $(DOCKER_TARGETS); do \
	  echo "docker build --target $$t -t $(DOCKER_REGISTRY)/fastpath-$$t:$(TAG) ."; \
	  docker build --target $$t -t $(DOCKER_REGISTRY)/fastpath-$$t:$(TAG) . || exit 1; \
	done

.PHONY: images
images: setup-core+cluster+vsock ## Build the OCI images (pause, operator, agent, bench, domain-hook, vsock-backend) without a Docker daemon into _out/images/ (docs/images.md).
	$(GO_HARNESS) run ./cmd/fastpath-dev images build --out $(ROOT)/_out/images $(IMAGES)

.PHONY: push
push: ## Push the archives of make images to REGISTRY=<host/path> as <repository>:TAG (default: the chart's appVersion), print each digest and write _out/images/digests.txt and values-digests.yaml (docs/install.md).
	@test -n "$(REGISTRY)" || { echo "push: set REGISTRY=<host[:port]/path>, e.g. make push REGISTRY=ghcr.io/you/fastpath"; exit 2; }
	$(GO_HARNESS) run ./cmd/fastpath-dev images push --out $(ROOT)/_out/images --registry $(REGISTRY) --tag $(TAG) $(if $(INSECURE),--insecure,) $(IMAGES)

.PHONY: kubevirt-images
kubevirt-images: setup-core+cluster+guests+kubevirt ## Build KubeVirt's images (virt-operator, -api, -controller, -handler, -launcher: localhost/kubevirt/<name>:<version>) and the guest's kernel boot image (localhost/fastpath-guest:local) without a daemon into _out/images/ (docs/kubevirt.md).
	$(GO_HARNESS) run ./cmd/fastpath-dev images build --out $(ROOT)/_out/images virt-operator virt-api virt-controller virt-handler virt-launcher guest-kernel-boot

.PHONY: images-import
images-import: ## Import _out/images/*.tar into the containerd at CONTAINERD_ADDRESS=<socket> (namespace k8s.io).
	@test -n "$(CONTAINERD_ADDRESS)" || { echo "images-import: set CONTAINERD_ADDRESS to the containerd socket"; exit 2; }
	$(GO_HARNESS) run ./cmd/fastpath-dev images import --out $(ROOT)/_out/images --address $(CONTAINERD_ADDRESS) $(IMAGES)

##@ Test

.PHONY: test
test: setup build vet verify ## Run every test: unit, envtest, datapath (root), both demos, e2e (namespace guests, real QEMU guests, then a real cluster).
	@# One package at a time (-p 1): the root datapath tests share this node's Open
	@# vSwitch, network namespaces and both CPUs, and netperf in one package starved
	@# ovs-vswitchd under another's 20 concurrent CNI ADDs. The soak, which SIGKILLs
	@# plugins in the middle of OVS port changes, runs last.
	@date -u +'test: %T stage product: unit, envtest, datapath (root)'
	go test $(GO_TEST_FLAGS) -p 1 ./...
	@# Our patches to vhost-device-vsock 0.3.0 (hack/vhost-device-vsock): the crate's unit tests.
	@date -u +'test: %T stage vhost-device-vsock: unit tests of the patched crate'
	bash hack/vhost-device-vsock/test.sh
	@date -u +'test: %T stage harness: local environment, real guests, cluster, e2e on namespace guests'
	$(GO_HARNESS) test $(GO_TEST_FLAGS) -p 1 $$(go list ./... | grep -v /soak)
	@date -u +'test: %T stage soak (short parts)'
	$(GO_HARNESS) test $(GO_TEST_FLAGS) ./soak/...
	@# The README's main job as a user runs it, both ways, checked by the lines it
	@# prints (hack/demo-check.sh): a broken demo fails make test.
	@date -u +'test: %T stage demo: make demo, then make demo GUESTS=qemu'
	bash hack/demo-check.sh netns
	bash hack/demo-check.sh qemu
	@date -u +'test: %T stage e2e on real QEMU guests'
	$(IN_HARNESS) FASTPATH_GUESTS=qemu go test $(GO_TEST_FLAGS) ./e2e/...
	@# The same suite on a real two-node cluster: kubelets, containerds, Multus and
	@# KubeVirt built from source (make setup-kubevirt, cached in bin/kubevirt/), its
	@# VMs booting the real guest under QEMU (TCG where KVM cannot boot a guest).
	@date -u +'test: %T stage e2e on a real cluster with KubeVirt'
	$(MAKE) e2e-cluster KUBEVIRT=1
	@date -u +'test: %T done'

.PHONY: soak
soak: setup-core build ## Fault-injection soak: SIGKILLed plugin, operator and agent, restarted kube-apiserver; summary per part, exit 1 on any loss (root; SOAK_FLAGS).
	$(DEV) soak --plugin $(BIN)/fastpath --operator $(BIN)/fastpath-operator --agent $(BIN)/fastpath-agent --vsock-backend $(BIN)/fastpath-vsock-backend $(SOAK_FLAGS)

.PHONY: e2e
e2e: setup-core$(if $(FASTPATH_GUESTS),+guests+vsock,) build ## Run the e2e suite (embedded local environment, or KUBECONFIG's cluster). FASTPATH_GUESTS=qemu for real VMs.
	$(GO_HARNESS) test $(GO_TEST_FLAGS) -v ./e2e/... -ginkgo.v

.PHONY: bench
bench: setup-core build ## Run the benchmarks: local node datapaths, CNI latency, relay cost, operator scale; fails when a target is missed or a benchmark could not run (_out/bench/junit.xml).
	@mkdir -p _out/bench
	@# One package at a time (-p 1), as make test: the relay and operator benchmarks
	@# load both cores, and the userspace OVS datapath of the CNI latency benchmark
	@# then misses its start deadline.
	FASTPATH_BENCH_DIR=$(ROOT)/_out/bench go test -count=1 -p 1 -run '^$$' -bench . -benchtime=1x -timeout 60m ./...
	@# The local benchmark judges its targets and the Go benchmarks' (their figures
	@# files in _out/bench): exit 1 when one is missed, 2 when it could not run
	@# (docs/benchmarks.md, "The local benchmark as a gate"); make reports either
	@# as "Error 1|2" and exits 2.
	@if [ -x $(BIN)/fastpath-bench ] && $(BIN)/fastpath-bench local --help >/dev/null 2>&1; then \
	  $(BIN)/fastpath-bench local --out _out/bench --junit-file _out/bench/junit.xml $(if $(FULL),--full,); fi

##@ Cluster (a REAL single-node Kubernetes on this machine, root; docs/install.md)

CLUSTER_DIR ?= $(ROOT)/_out/cluster
CLUSTER := $(DEV) cluster --dir $(CLUSTER_DIR) --bin-dir $(BIN) --images-dir $(ROOT)/_out/images
E2E_FAILURES := $(ROOT)/_out/e2e-cluster-failures.txt

# KUBEVIRT=1 (the default): the cluster runs KubeVirt, built from source (make
# setup-kubevirt, make kubevirt-images) at the version hack/tools/kubevirt pins;
# KUBEVIRT=0: a cluster without KubeVirt (kubelet, containerd, Multus only).
KUBEVIRT ?= 1
KUBEVIRT_VERSION = $(shell awk '$$1 == "require" && $$2 == "kubevirt.io/kubevirt" { print $$3 }' $(ROOT)/hack/tools/kubevirt/go.mod)
CLUSTER_KUBEVIRT = $(if $(filter 1,$(KUBEVIRT)),--kubevirt --kubevirt-dir $(BIN)/kubevirt/$(KUBEVIRT_VERSION),)
# NODES=2 (or 3): each node in network, mount, UTS and PID namespaces of its
# own, on the bridge fpnodes0; 1: the node is this host. make cluster defaults
# to 1, make e2e-cluster to 2 (its two-node specs need them).
NODES ?=
CLUSTER_UP = $(CLUSTER) up $(CLUSTER_KUBEVIRT) --nodes $(or $(NODES),1)

.PHONY: cluster
cluster: setup-core+tools+cluster$(if $(filter 1,$(KUBEVIRT)),+guests+kubevirt,) build images $(if $(filter 1,$(KUBEVIRT)),kubevirt-images,) ## Start a real cluster (kubelet, containerd, Multus, KubeVirt built from source: kubelet root /var/lib/kubelet, shared mounts; NODES=2 or 3: each node in its own namespaces) under _out/cluster and wait until KubeVirt is Available; KUBECONFIG=_out/cluster/kubeconfig. KUBEVIRT=0: without KubeVirt.
	$(CLUSTER_UP)

.PHONY: cluster-down
cluster-down: ## Stop the cluster and remove everything it made (containers, shims, mounts, cgroups, netns, links, processes).
	@test -x $(DEV) || (cd e2e && CGO_ENABLED=0 go build -trimpath -o $(DEV) ./cmd/fastpath-dev)
	$(CLUSTER) down

.PHONY: cluster-install
cluster-install: build ## Push the images and the chart to the cluster's registry and helm install Fastpath from it by digest, as docs/install.md tells a user (KUSTOMIZE=1: kubectl apply -k config/default with the imported images).
	$(CLUSTER) install $(if $(KUSTOMIZE),--kustomize,)

.PHONY: cluster-uninstall
cluster-uninstall: ## helm uninstall Fastpath from the cluster as docs/operations.md tells a user (the chart's hook cleans every node); cluster-down then fails on a link with the agent's marks left.
	$(CLUSTER) uninstall

.PHONY: e2e-cluster
e2e-cluster: setup-core+tools+cluster$(if $(filter 1,$(KUBEVIRT)),+guests+kubevirt,) build images $(if $(filter 1,$(KUBEVIRT)),kubevirt-images,) ## The e2e suite on a fresh real cluster of two nodes (NODES=1..3): make cluster, cluster-install, go test ./e2e with its KUBECONFIG, helm uninstall (cluster-down then fails on a link with the agent's marks left on a node), cluster-down (KUBEVIRT=0: no KubeVirt, the VM specs are reported not run).
	@# "|| rc=": under the shell's -e a failure at the end of the && list would
	@# exit the recipe before the cluster is taken down.
	@# The suite writes what failed and why to $(E2E_FAILURES), printed last so
	@# that the tail of a CI log carries it (and the random seed).
	@start=$$(date +%s); rc=0; mkdir -p $(dir $(E2E_FAILURES)); rm -f $(E2E_FAILURES); \
	$(CLUSTER) up $(CLUSTER_KUBEVIRT) --nodes $(or $(NODES),2) && $(CLUSTER) install && \
	  ($(IN_HARNESS) KUBECONFIG=$(CLUSTER_DIR)/kubeconfig FASTPATH_E2E_FAILURES=$(E2E_FAILURES) $(if $(filter 1,$(KUBEVIRT)),PATH=$(BIN)/kubevirt/$(KUBEVIRT_VERSION):$$PATH FASTPATH_E2E_VM_SAMPLES=$(ROOT)/config/samples/cluster/kubevirt,) go test $(GO_TEST_FLAGS) -v ./e2e/... -ginkgo.v) || rc=$$?; \
	if [ $$rc = 0 ]; then $(CLUSTER) uninstall || rc=1; fi; \
	$(CLUSTER) down || rc=1; \
	if [ -s $(E2E_FAILURES) ]; then echo "e2e-cluster: what failed ($(E2E_FAILURES)):"; cat $(E2E_FAILURES); fi; \
	echo "e2e-cluster: $$(( $$(date +%s) - start ))s, exit $$rc"; exit $$rc

##@ Demo

.PHONY: demo-check
demo-check: ## Run make demo and make demo GUESTS=qemu and check the lines a user reads (part of make test; root).
	bash hack/demo-check.sh netns
	bash hack/demo-check.sh qemu

.PHONY: demo
demo: setup-core$(if $(GUESTS),+guests+vsock,) build ## Run Fastpath's whole job on an embedded local environment (root). FULL=1 for the papers' matrix, GUESTS=qemu for real VMs.
	$(BIN)/kubectl-fastpath demo $(if $(FULL),--full,) $(if $(GUESTS),--guests=$(GUESTS),)
