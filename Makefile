# opkit — the commands in README.md. Every target does its own set-up.
SHELL := /bin/bash
CARGO ?= cargo
# Where the control plane (and, if needed, a Go toolchain) is built and kept.
OPKIT_CACHE ?= $(HOME)/.cache/opkit
export OPKIT_CACHE
# Test and demo builds do not need incremental state (it costs GBs of disk).
CARGO_INCREMENTAL ?= 0
export CARGO_INCREMENTAL
# Cargo's target directory for everything make builds (the workspace, the
# journeys' generated projects under opkit-generated/, trybuild's, the
# docs.rs-like docs) lives in the cache outside the clone, one directory per
# clone path: a fresh clone at a path built before (CI's) reuses every
# compiled dependency and the journeys' persisted projects, and compiles
# only what its newer files change. Per path, never one for all: cargo
# names the workspace's crates by their path inside the workspace and
# trusts modification times, so two checkouts sharing one would take each
# other's builds. A CARGO_TARGET_DIR of your own wins; plain `cargo`
# outside make builds in ./target. tests/target-dirs.sh removes the least
# recently used ones past OPKIT_TARGET_DIRS_MAX_GB.
CARGO_TARGET_DIR ?= $(OPKIT_CACHE)/target-dirs/$(notdir $(CURDIR))-$(shell printf '%s' '$(CURDIR)' | sha256sum | cut -c1-12)
export CARGO_TARGET_DIR

.PHONY: help demo test test-fast test-prerequisites nextest test-binaries book check-package controlplane registry helm cluster-assets cluster dev-cluster check-orphans lint generate bench bench-workqueue bench-informer bench-e2e bench-scale bench-webhook bench-shard bench-multicluster bench-multicluster-peers bench-managed-fields bench-memory bench-build

help:
	@echo "make demo          run the Memcached operator on a local cluster (builds what is missing)"
	@echo "make test          build the control plane if missing, run every test, check for leftovers"
	@echo "make test-fast     every test but the journeys (generated projects, local clusters), with nextest"
	@echo "make controlplane  build kube-apiserver and etcd into $(OPKIT_CACHE)/controlplane"
	@echo "make dev-cluster   start a local control plane and keep it running until Ctrl-C"
	@echo "make cluster       start a local single-node cluster with a registry until Ctrl-C (REGISTRY=0: without)"
	@echo "make registry      build the OCI registry (distribution) into $(OPKIT_CACHE)/registry"
	@echo "make helm          build the Helm CLI into $(OPKIT_CACHE)/helm (the chart tests use it)"
	@echo "make cluster-assets build the cluster's components ($(OPKIT_CACHE)/cluster) and images ($(OPKIT_CACHE)/images)"
	@echo "make book          build the user guide (book/) into book/book/index.html (installs mdbook, pinned)"
	@echo "make generate      regenerate the protobuf decoders (sdk/src/cache/decode/protobuf/generated.rs) from the pinned Kubernetes sources"
	@echo "make lint          cargo fmt --check, clippy with warnings denied (all features, then each opkit feature alone), the layer check (tests/layers) and rustdoc as docs.rs runs it"
	@echo "make check-package the published crates from a local registry: a generated project built and tested (part of make test)"
	@echo "make bench         run the benchmarks and print ratio tables"
	@echo "make bench-e2e     one operator in opkit, controller-runtime and kube-runtime, end to end"
	@echo "make bench-webhook create latency with and without opkit's admission webhooks"
	@echo "make bench-memory  bytes per cached ConfigMap and Pod by component, opkit vs client-go"
	@echo "make bench-scale   one Pod controller in opkit and controller-runtime over 10k kwok Pods with churn"
	@echo "make bench-multicluster what an engaged cluster costs, and what disengaging gives back"
	@echo "make bench-multicluster-peers the same, opkit's Fleet vs multicluster-runtime (Go), each its own process"
	@echo "make bench-shard   sharded replicas: per-replica cache (1 vs 3), throughput and takeover (1-4 replicas), pause at a membership change"
	@echo "make bench-build   generated projects (plain, with a webhook): crates, cold debug build, release binary and image"

controlplane:
	@tests/controlplane/build.sh >/dev/null

# The OCI registry image tests push to and the local cluster pulls from
# (distribution's `registry`, built from the Go module proxy).
registry:
	@tests/registry/build.sh >/dev/null

# The Helm CLI the tests of `cargo opkit chart`'s chart run (helm.sh/helm/v4,
# built from the Go module proxy); generated projects' `make helm-deploy`
# uses it too.
helm:
	@tests/helm/build.sh >/dev/null

# The rest of the local cluster: kube-controller-manager, kube-scheduler,
# kubelet, kube-proxy, kubectl, containerd, runc, CNI plugins; then the images
# its node imports and the cluster DNS (CoreDNS), each in a cache of its own
# (an image change rebuilds only that).
cluster-assets: controlplane
	@tests/node/build-node.sh >/dev/null
	@tests/node/build-images.sh >/dev/null
	@tests/coredns/build.sh >/dev/null

# The Memcached operator (examples/memcached) on a local cluster: real
# controllers, scheduler, kubelet and memcached pods (builds what is missing).
demo: cluster-assets
	@$(CARGO) build -p memcached-operator --example demo
	@$(CARGO) run --quiet -p memcached-operator --example demo

# Every test, then the leftover check. The run records what it starts in
# a directory of its own (OPKIT_RUN_DIR), and check-orphans judges only that.
# tests/run-tests.sh builds the test binaries once, runs the doc tests and,
# with cargo-nextest (installed pinned by tests/nextest.sh), every other
# test in a process of its own as .config/nextest.toml says (the journeys
# first, at most six at once; a JUnit report under the target directory).
# TEST_ARGS go to cargo nextest run, e.g. TEST_ARGS=leader for the tests
# whose names contain "leader", or TEST_ARGS="-E 'test(/^cache_/)'".
test: test-prerequisites
	@run=$$(mktemp -d "$${TMPDIR:-/tmp}/opkit-run.XXXXXX"); \
	GO=$$(tests/controlplane/ensure-go.sh) OPKIT_RUN_DIR=$$run CARGO=$(CARGO) tests/run-tests.sh $(TEST_ARGS); rc=$$?; \
	OPKIT_RUN_DIR=$$run tests/check-orphans.sh || rc=1; \
	rm -rf "$$run"; exit $$rc

# A contributor's inner loop: every test but the journeys (nextest's
# profile `fast`: no generated project built, no local cluster started)
# and the doc tests; `make test` still runs everything.
test-fast: test-prerequisites
	@run=$$(mktemp -d "$${TMPDIR:-/tmp}/opkit-run.XXXXXX"); \
	GO=$$(tests/controlplane/ensure-go.sh) OPKIT_RUN_DIR=$$run NEXTEST_PROFILE=fast CARGO=$(CARGO) tests/run-tests.sh $(TEST_ARGS); rc=$$?; \
	OPKIT_RUN_DIR=$$run tests/check-orphans.sh || rc=1; \
	rm -rf "$$run"; exit $$rc

# What the tests need before the first one starts, built at the same time
# when missing (a new machine): the local cluster's Go parts, the registry
# and helm (their downloads and one-core links leave a core idle),
# cargo-nextest from crates.io and the workspace's test binaries. Warm,
# each returns at once. tests/target-dirs.sh first: it may empty the
# target directory the test build uses.
test-prerequisites:
	@tests/target-dirs.sh
	@$(MAKE) --no-print-directory -j5 cluster-assets registry helm nextest test-binaries

nextest:
	@tests/nextest.sh >/dev/null

# A failed test build is not fatal here: tests/run-tests.sh builds again
# and sums the run up ("tests: 0 passed, 1 failed (the build failed)").
test-binaries:
	@CARGO=$(CARGO) tests/run-tests.sh --build-only || echo "make: the test build failed; tests/run-tests.sh reports it" >&2

# Needs OPKIT_RUN_DIR: the directory a test run recorded into.
check-orphans:
	@tests/check-orphans.sh

dev-cluster: controlplane
	@$(CARGO) build -p opkit-envtest --example dev_cluster
	@$(CARGO) run --quiet -p opkit-envtest --example dev_cluster

# A whole local cluster (control plane, controllers, scheduler, one node and,
# unless REGISTRY=0, an OCI registry the node pulls from) until Ctrl-C; prints
# each start phase, the kubeconfig and the registry. Needs root.
REGISTRY ?= 1
cluster: cluster-assets registry
	@echo "make cluster: building the cluster program (cargo's progress below)"
	@$(CARGO) build -p opkit-envtest --example cluster
	@$(CARGO) run --quiet -p opkit-envtest --example cluster -- \
	  $(if $(filter 0 no false,$(REGISTRY)),--no-registry)

# The four crates as published (cargo package, a local directory registry,
# cargo install cargo-opkit, a generated project built and tested), with the
# MSRV toolchain. `make test` runs it too (cargo-opkit's test published_crates).
check-package: controlplane
	@tests/package/check.sh

# The user guide: mdBook (pinned, installed from crates.io into
# $(OPKIT_CACHE)/mdbook by book/build.sh) builds book/ into book/book/.
# make test checks it too (templates/tests/it/book.rs, opkit-tests' doc tests).
book:
	@book/build.sh >/dev/null && echo "book: book/book/index.html"

# The protobuf decoders, from the generated.proto files and Go structs of
# the pinned Kubernetes modules (Go module proxy, kept in $(OPKIT_CACHE)/gomod)
# and the k8s-openapi source; `cargo test -p opkit-protobuf-gen` fails when
# the checked-in file is out of date.
generate:
	GO=$$(tests/controlplane/ensure-go.sh) $(CARGO) run --quiet -p opkit-protobuf-gen -- sdk/src/cache/decode/protobuf/generated.rs

# The layer check: no circle between files or module folders, no import
# from a lower layer to a higher one (tests/layers/layers.txt names the
# layers, DESIGN.md draws them); its own tests first. The docs.rs-like
# rustdoc run builds in a target directory of its own: RUSTC_BOOTSTRAP
# reruns some dependencies' build scripts (proc-macro2's among them), which
# in the shared one would make the next build recompile most dependencies.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	CARGO=$(CARGO) tests/features/check.sh
	python3 tests/layers/test_check_layers.py -q
	python3 tests/layers/check_layers.py
	RUSTDOCFLAGS='-D warnings --cfg docsrs' RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$${CARGO_TARGET_DIR:-target}/docsrs $(CARGO) doc --no-deps --workspace --all-features --quiet
	tests/api/feature-items-used.sh

bench: bench-workqueue bench-informer bench-e2e bench-scale bench-webhook bench-shard bench-multicluster bench-multicluster-peers bench-memory bench-managed-fields

bench-workqueue:
	@tests/peers/bench-workqueue.sh

bench-informer: controlplane
	@tests/peers/bench-informer.sh

# The same operator in opkit, controller-runtime and kube-runtime against one
# control plane (issue 13). SIZES=1000,10000 REPS=3 by default.
bench-e2e: controlplane
	@tests/peers/bench-e2e.sh

# Build figures of two generated projects, plain and with a webhook (issue
# 37): crates in the graph, cold debug build CPU, release build, binary and
# image size. Long (cold builds); not part of `make bench`.
bench-build:
	$(CARGO) build -p cargo-opkit && tests/peers/build-figures.sh

# The memory model (issue 27): bytes per cached ConfigMap and Pod by
# component (k8s-openapi layout, opkit's overhead, malloc, RSS) against
# client-go's heap for the same objects. OBJECTS=10000 REPS=3 by default.
bench-memory: controlplane
	@tests/peers/bench-memory.sh

# One Pod controller in opkit and controller-runtime watching 10k Pods on
# kwok's simulated Nodes through churn: memory per Pod, CPU per watch event
# (issue 13). PODS=10000 REPS=3 by default; builds kwok v0.8.0 if missing.
bench-scale: controlplane
	@tests/peers/bench-scale.sh

# The per-replica cache of 1 and 3 sharded replicas (Sharding::by_namespace,
# shard_replica processes) over 3 000 ConfigMaps, with the apiserver's
# ShardedListAndWatch gate on and off; then the throughput of 1-4 replicas
# over 10 000 ConfigMaps (4 workers, a reconcile waiting 20 ms) and a
# SIGKILLed replica's takeover (issue 26); then how long reconciles pause
# when a replica joins, leaves and crashes (issue 38). Prints tables.
bench-shard: controlplane
	$(CARGO) test -p opkit-tests --test it shard_cache::measure -- --ignored --nocapture
	$(CARGO) test -p opkit-tests --test it shard_bench -- --ignored --nocapture
	$(CARGO) test -p opkit-tests --test it shard_pause_bench -- --ignored --nocapture

# What an engaged cluster costs a multicluster operator (1, 10, 50 clusters
# of 1 000 ConfigMaps each) and what disengaging gives back (issue 41).
bench-multicluster: controlplane
	$(CARGO) test -p opkit-tests --test it multicluster::footprint_bench -- --ignored --nocapture

# The same against sigs.k8s.io/multicluster-runtime: opkit's Fleet and the Go
# peer each engage N = 1, 10, 50, 50 clusters of 1 000 ConfigMaps as release
# builds of their own; engage time, memory per cluster, CPU per event and RSS
# after disengaging, opkit ÷ multicluster-runtime. OBJECTS, ROUNDS, RUNS.
bench-multicluster-peers: controlplane
	@tests/peers/bench-multicluster-peers.sh

# What managedFields cost a cached ConfigMap and Pod, decoded by k8s-openapi,
# as raw bytes (WithManagedFields) and in client-go (issue 27); prints a table.
bench-managed-fields: controlplane
	@tests/peers/bench-managed-fields.sh

# Create latency against a real apiserver, with and without opkit's
# validating and mutating webhooks in the path (CREATES=300 by default).
bench-webhook: controlplane
	@$(CARGO) bench -p opkit-tests --bench admission_latency
