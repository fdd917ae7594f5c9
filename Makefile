# mpijob: MPI jobs on Kubernetes through Kubeflow Trainer V2.
# The two commands that matter: `make dev` and `make test` (see README.md).

SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
DEV := $(BIN)/mpijob-dev
GOLANGCI_LINT_VERSION := v2.15.0
CACHE_DIR := $(or $(MPIJOB_CACHE_DIR),$(CURDIR)/.cache)
GOLANGCI_LINT := $(CACHE_DIR)/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)
E2E_TIMEOUT ?= 75m
PYTHON ?= python3
VENV := $(CACHE_DIR)/sdk-venv
# The SDK with Kubeflow Pipelines (mpijob.kfp), in a virtualenv of its own:
# kfp pins an older Kubernetes client than the SDK's own tests run with.
KFP_VENV := $(CACHE_DIR)/kfp-venv
WEB := dashboard/web
CHROMIUM ?= /usr/bin/chromium

.PHONY: all
all: build

##@ Development

# make dev builds every runtime's image that is missing once the cluster is
# up, in the background, so each runtime's first test passes; IMAGES=0
# leaves them to be built on their first use.
IMAGES ?= 1
PREBUILD := $(if $(filter 0,$(IMAGES)),,--prebuild-images)

.PHONY: dev
dev: $(DEV) dashboard ## Start the local cluster with everything installed and a sample MPI job; Ctrl-C stops it (IMAGES=0: build each runtime's image at its first use, not ahead).
	$(DEV) up $(PREBUILD) --sample config/samples/mpi-hello.yaml

.PHONY: dev-detach
dev-detach: $(DEV) dashboard ## Start the local cluster and return, leaving it running (IMAGES=0 as for dev).
	$(DEV) up --detach $(PREBUILD) --sample config/samples/mpi-hello.yaml

.PHONY: dev-down
dev-down: $(DEV) ## Stop the local cluster and remove everything it made on this machine.
	$(DEV) down

.PHONY: dev-status
dev-status: $(DEV) ## Say whether the local cluster runs.
	$(DEV) status

.PHONY: dev-reload
dev-reload: $(DEV) dashboard ## Rebuild mpijob-manager and the dashboard from this checkout and restart them in the running cluster (runtimes and roles re-applied), and restart the image builder with its image recipes.
	$(DEV) reload

##@ Build

.PHONY: build
build: dashboard ## Build every binary into bin/ (the dashboard with its front end).
	$(GO) build -o $(BIN)/ ./cmd/...

# mpijob-dev is built the way the cluster's mpijob-manager and
# mpijob-dashboard images are (static, -trimpath: staticGoBuild in
# pkg/localcluster/release.go),
# so a first `make dev` compiles the packages they share once, not twice.
.PHONY: $(DEV)
$(DEV):
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/mpijob-dev

.PHONY: install-plugin
install-plugin: ## Install kubectl-mpijob and its completion helper kubectl_complete-mpijob into $GOBIN (then: kubectl mpijob ..., with Tab).
	$(GO) install ./cmd/kubectl-mpijob
	install -m 0755 cmd/kubectl-mpijob/kubectl_complete-mpijob "$$($(GO) env GOBIN || true)$$( [ -n "$$($(GO) env GOBIN)" ] || echo "$$($(GO) env GOPATH)/bin")/kubectl_complete-mpijob"

# The front end is rebuilt only when its sources or lockfile change (the
# hash of its inputs is kept next to the build); node_modules only when the
# lockfile changes.
.PHONY: dashboard
dashboard: ## Build the dashboard's front end (npm ci, vite build) into dashboard/static/app when its inputs changed.
	@hash=$$(cat $(WEB)/package-lock.json $(WEB)/package.json $(WEB)/index.html $(WEB)/vite.config.ts $(WEB)/tsconfig.json $$(find $(WEB)/src -type f | sort) | sha256sum | cut -c1-16); \
	if [ -f dashboard/static/app/index.html ] && [ "$$(cat dashboard/static/app/.inputs 2>/dev/null)" = "$$hash" ]; then echo "dashboard front end is current ($$hash)"; exit 0; fi; \
	$(MAKE) --no-print-directory web-deps || exit 1; \
	echo "building the dashboard front end ($$hash)"; \
	(cd $(WEB) && npm run --silent build) || exit 1; \
	echo $$hash > dashboard/static/app/.inputs

.PHONY: web-deps
web-deps:
	@lock=$$(sha256sum $(WEB)/package-lock.json | cut -c1-16); \
	if [ "$$(cat $(WEB)/node_modules/.lock-hash 2>/dev/null)" != "$$lock" ]; then \
		echo "npm ci in $(WEB) (lockfile $$lock)"; \
		(cd $(WEB) && npm ci --no-audit --no-fund --cache $(CACHE_DIR)/npm) || exit 1; \
		echo $$lock > $(WEB)/node_modules/.lock-hash; \
	fi

# Browser tests drive Debian's chromium through playwright-core (no
# downloaded browsers).
.PHONY: browser
browser:
	@test -x $(CHROMIUM) || { echo "installing Debian's chromium for the browser tests"; apt-get install -y -q chromium >/dev/null || { echo "cannot install chromium: run apt-get install chromium"; exit 1; }; }

.PHONY: docs
docs: sdk-venv ## Regenerate docs/cli.md from the commands and docs/sdk.md from the SDK's docstrings.
	$(GO) run ./cmd/kubectl-mpijob docs --output docs/cli.md
	PYTHONPATH=sdk/python $(VENV)/bin/python sdk/python/tools/gendoc.py docs/sdk.md

REGISTRY ?=
.PHONY: images
images: $(DEV) dashboard ## Build every MPI image (OpenMPI 4 and 5, MPICH, Intel MPI, Intel MPI with TensorFlow, Horovod, DeepSpeed, and the CUDA image for GPU Workers) into the cache and the running cluster (the CUDA image stays in the cache: no node here has a GPU); with REGISTRY=quay.io/team also push them and mpijob's own, and write config/registry.
	$(DEV) images --all $(if $(REGISTRY),--push $(REGISTRY) --overlay config/registry)

.PHONY: toolchain
toolchain: $(DEV) ## Build the pinned cluster toolchain and MPI images into the cache.
	$(DEV) build

##@ Test

.PHONY: test
test: verify test-unit test-web test-sdk-unit test-cuda-image test-e2e ## Run every check and test (what CI runs).

# The CUDA image for GPU Workers (ghcr.io/mpijob/openmpi-cuda) is checked
# without a GPU: its build runs `import torch, torch.cuda.nccl` in the
# finished image and fails unless PyTorch is a CUDA build and NCCL says its
# version. make test builds it before the local cluster starts, while the
# disk has the room its build needs (about 20 GiB); built once, it is
# cached by its inputs (the check among them), so a cached image is one
# that passed.
.PHONY: test-cuda-image
test-cuda-image: $(DEV) ## Build the CUDA image for GPU Workers if its inputs changed: the build checks, with no GPU, that PyTorch is a CUDA build and NCCL's version is readable.
	$(DEV) images openmpi-cuda

.PHONY: test-web
test-web: web-deps ## The dashboard front end's component tests (vitest) and type check.
	cd $(WEB) && npx --no-install tsc --noEmit && npx --no-install vitest run

.PHONY: sdk-venv
sdk-venv: ## Install the Python SDK as a user would (pip install ./sdk/python) into a virtualenv in the cache.
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { echo "installing python3-venv"; apt-get install -y -q python3-venv >/dev/null; }
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --cache-dir $(CACHE_DIR)/pip --upgrade "./sdk/python[test,lint,s3,notebook]"
	@# The same version number: pip keeps an installed copy, so the SDK itself is reinstalled from this checkout.
	$(VENV)/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps ./sdk/python
	@rm -rf sdk/python/build

.PHONY: kfp-venv
kfp-venv: ## Install the Python SDK with Kubeflow Pipelines (pip install "./sdk/python[kfp,s3]"), and the Model Registry's own client that reads registrations back, into a virtualenv in the cache.
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { echo "installing python3-venv"; apt-get install -y -q python3-venv >/dev/null; }
	@test -x $(KFP_VENV)/bin/python || $(PYTHON) -m venv $(KFP_VENV)
	$(KFP_VENV)/bin/pip install -q --disable-pip-version-check --cache-dir $(CACHE_DIR)/pip --upgrade "./sdk/python[kfp,s3,checkpoint]" "pytest>=8,<9" "model-registry==0.3.14"
	$(KFP_VENV)/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps ./sdk/python
	@rm -rf sdk/python/build

.PHONY: test-sdk-unit
test-sdk-unit: sdk-venv kfp-venv ## Python SDK unit tests (no cluster), and mpijob.kfp's with Kubeflow Pipelines.
	$(VENV)/bin/python -m compileall -q sdk/python/mpijob
	cd sdk/python && $(VENV)/bin/pytest -q -p no:cacheprovider -m "not cluster"
	cd sdk/python && $(KFP_VENV)/bin/pytest -q -p no:cacheprovider -m "not cluster" tests/test_kfp.py

.PHONY: test-unit
test-unit: ## Unit tests of pure packages.
	$(GO) test -count=1 ./...

# The e2e and framework tests share one cluster: a running local cluster (or
# the one MPIJOB_KUBECONFIG names) is reused and left running; otherwise one
# is started for the run and stopped after it (KEEP_CLUSTER=1 keeps it).
# hack/test-e2e.sh runs two lanes side by side (the e2e package; the
# integration package, then the Python SDK's cluster tests), then, on
# their own, the tests that stop mpijob-manager (restart, failover, manager
# down: while it is down no MPI job can be created) and those that take
# away what others use (TestAlone*: an image).
MANAGER_DOWN_TESTS := ^(TestManagerDown|TestAlone)
.PHONY: test-e2e
test-e2e: $(DEV) sdk-venv kfp-venv dashboard browser ## Integration and e2e tests (Go, and the Python SDK's) against the real local cluster.
	@set -u; mkdir -p .cache; started=0; \
	if [ -n "$${MPIJOB_KUBECONFIG:-}" ]; then echo "testing against $$MPIJOB_KUBECONFIG"; \
	elif $(DEV) status >/dev/null 2>&1; then echo "reusing the running local cluster"; $(DEV) status --wait 40m || exit 1; \
	else $(DEV) up --detach || exit 1; started=1; fi; \
	GO=$(GO) VENV=$(VENV) KFP_VENV=$(KFP_VENV) E2E_TIMEOUT=$(E2E_TIMEOUT) MANAGER_DOWN_TESTS='$(MANAGER_DOWN_TESTS)' hack/test-e2e.sh; rc=$$?; \
	if [ $$started = 1 ] && [ -z "$${KEEP_CLUSTER:-}" ]; then $(DEV) down; fi; exit $$rc

.PHONY: bench
bench: ## Benchmarks (printed tables).
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

.PHONY: bench-manager
bench-manager: ## mpijob-manager overhead and 500 x 8 scale (needs a running local cluster, ~20 min).
	$(GO) run -tags e2e ./bench/manager

.PHONY: bench-admission
bench-admission: ## Latency that admission webhooks add (needs a running local cluster).
	$(GO) run ./bench/admission

.PHONY: bench-scale
bench-scale: ## Bare engine vs the full install in one run: 500 x 8 jobs, a 50 x 8 burst, 500 suspended creates, webhook p50/p99, manager RSS and CPU per job (needs a running local cluster, ~30 min).
	$(GO) run -tags e2e ./bench/scale

.PHONY: bench-statuswrite
bench-statuswrite: ## What one status write costs the control plane on the TrainJob, on a ConfigMap and on a custom resource of mpijob's own, and one Launcher log read: CPU by program and API requests per call (needs a running local cluster, ~12 min).
	$(GO) run -tags e2e ./bench/statuswrite

.PHONY: bench-burst
bench-burst: ## 500 TrainJob creates from 20 clients through admission, then again with mpijob-manager killed mid-burst: latency and outcomes (needs a running local cluster, root).
	$(GO) run ./bench/burst
	$(GO) run ./bench/burst -kill

.PHONY: bench-chaos
bench-chaos: ## 100 jobs of mixed outcomes (success, an OOM-killed Worker, a deadline, suspend and resume, delete) on the kwok nodes while mpijob-manager's pods are killed at random, both replicas included: lost, duplicated and resurrected jobs, statuses, Events and NetworkPolicies against a calm run (needs a running local cluster, ~15 min).
	$(GO) run -tags e2e ./bench/chaos

.PHONY: bench-dataplane
bench-dataplane: ## Allreduce latency and bandwidth of every MPI flavour, pods on the two nodes vs the same ranks on the host, and MPI start-up over 32 packed Workers (needs a running local cluster, root).
	$(GO) run ./bench/dataplane

.PHONY: bench-dashboard
bench-dashboard: build sdk-venv browser ## Listing N jobs (N=1000): kubectl mpijob get and the SDK against kubectl get trainjob, the dashboard's list API p95, first rows in Chromium, a change in the open page (needs a running local cluster).
	$(GO) run ./bench/dashboard -n $(or $(N),1000)

.PHONY: bench-dashboard-logs
bench-dashboard-logs: ## Dashboard peak memory with 30 readers of a 10-pod job's merged log: streamed (now) vs whole logs (before), in one run.
	$(GO) test ./dashboard -run '^$$' -bench MergedLogsMemory -benchtime 1x

# bench-training runs the reference CNN with plain mpiexec (no cluster):
# PyTorch from Debian on a machine without it, MPICH and mpi4py from pinned
# wheels where the machine has no working MPI. BENCH_PYTHON is a Python with
# PyTorch (a GPU machine's own, say); BENCH_ARGS go to bench/training/bench.py.
BENCH_PYTHON ?= /usr/bin/python3
BENCH_WHEELS := $(CACHE_DIR)/wheels/bench-training
.PHONY: bench-training
bench-training: ## The reference CNN's samples/s on 1, 2, 4, 8 and 16 CPU ranks and on the GPU, with speed-up and efficiency (no cluster; BENCH_ARGS="--ranks 1,2").
	@$(BENCH_PYTHON) -c 'import torch, sklearn' 2>/dev/null || { \
	  if [ "$(BENCH_PYTHON)" = /usr/bin/python3 ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's python3-torch and python3-sklearn for the bench"; DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-sklearn >/dev/null; \
	  else echo "bench-training: $(BENCH_PYTHON) lacks PyTorch or scikit-learn: install python3-torch and python3-sklearn (Debian), or set BENCH_PYTHON to a Python that has them"; exit 2; fi; }
	@mkdir -p $(BENCH_WHEELS)
	@v=$$($(BENCH_PYTHON) -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")'); \
	  ls $(BENCH_WHEELS)/mpich-5.0.2-*.whl >/dev/null 2>&1 && ls $(BENCH_WHEELS)/mpi4py-4.1.2-cp$${v/./}-*.whl >/dev/null 2>&1 || \
	  python3 -m pip download -q --no-deps --only-binary=:all: --python-version $$v --implementation cp \
	    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
	    -d $(BENCH_WHEELS) mpich==5.0.2 mpi4py==4.1.2
	$(BENCH_PYTHON) bench/training/bench.py --wheels $(BENCH_WHEELS) $(BENCH_ARGS)

.PHONY: bench-cluster
bench-cluster: ## Measure the local cluster (start, MPI jobs, memory, teardown); needs root and no running cluster.
	$(GO) run ./bench/cluster

##@ Lint

.PHONY: verify
verify: $(GOLANGCI_LINT) sdk-venv web-deps ## gofmt, go vet, golangci-lint, go.mod tidy; the front end's generated types and ESLint; ruff and mypy --strict on the Python SDK.
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/toolchain/')); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags e2e ./...
	$(GOLANGCI_LINT) run --build-tags e2e ./...
	$(GO) mod tidy -diff
	@for d in hack/toolchain/*/; do (cd $$d && $(GO) mod tidy -diff >/dev/null) || { echo "$$d is not tidy: run go mod tidy there"; exit 1; }; done
	$(GO) run ./hack/tsgen -check
	cd $(WEB) && npx --no-install eslint .
	cd sdk/python && $(VENV)/bin/ruff check --no-cache . ../../examples ../../bench/training && $(VENV)/bin/mypy --cache-dir=/dev/null

$(GOLANGCI_LINT):
	@mkdir -p $(dir $@)
	GOBIN=$(dir $@) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(dir $@)/golangci-lint $@

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-14s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
