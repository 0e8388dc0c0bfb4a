# make help lists the targets. The local control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok) runs from ./bin on loopback;
# its ports and state directory come from the environment, see
# test/cluster/env.sh.

GO ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# Scenario names for make smoke, e.g. SMOKE=plane; empty runs them all.
SMOKE ?=
GOTESTFLAGS ?=

CLUSTER := test/cluster
WITH_CLUSTER := $(CLUSTER)/with-cluster.sh

.DEFAULT_GOAL := help
.PHONY: help build tools promtool cluster-up cluster-down run test unit integration smoke faults rbac-check monitoring-check bench fuzz lint fmt clean

help: ## List the targets
	@echo "Usage: make TARGET"
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-17s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

build: ## Build bin/stencil and bin/stencil-test (what "stencil test" runs)
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/stencil ./cmd/stencil
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/stencil-test ./cmd/stencil-test

tools: ## Build the pinned control-plane binaries, kwok and promtool into bin/ (skipped when up to date)
	test/tools/install.sh
	test/tools/promtool/install.sh

promtool: ## Build the pinned promtool into bin/ (skipped when up to date; make tools builds it too)
	test/tools/promtool/install.sh

cluster-up: ## Start the local control plane; admin kubeconfig in .cluster/kubeconfig
	$(CLUSTER)/up.sh

cluster-down: ## Stop the local control plane
	$(CLUSTER)/down.sh

run: cluster-up build ## Install crds/, run the controller with crds/stencil.yaml, apply the samples (Ctrl-C stops it)
	$(CLUSTER)/run.sh

# Runs every phase even when one fails, times each, and fails if any failed.
test: ## Run lint, unit, integration, smoke and fault tests, then rbac-check and monitoring-check
	@rc=0; for t in lint unit integration smoke faults rbac-check monitoring-check; do \
	  start=$$(date +%s); \
	  if $(MAKE) --no-print-directory $$t; then r=passed; else r=FAILED; rc=1; fi; \
	  echo "test: $$t $$r in $$(( $$(date +%s) - start ))s"; \
	done; exit $$rc

# The render property tests: hostile corpora and budgets rendered one at a
# time on one goroutine. The race detector finds nothing there and makes
# them 6 to 9 times slower (205 s against 31 s), so they run without it.
# TestTinyValuesStayInTheWorker measures the controller's resident memory
# while its workers build large results, which the race detector's
# slowdown and shadow memory would only blur.
PROPERTY_TESTS = TestHostileValuesKeepFieldPaths|TestChartRendersUnderTheBudget|FuzzRenderBudget|TestRenderHostileValues|TestRenderBudgetDefaultsFitDuplicateCount|TestHelmCreateChartHostile|TestRenderBudgetBoundsAmplification|TestRenderBudgetStopsHostileValues|TestTinyValuesStayInTheWorker

unit: ## Run the unit tests under the race detector (go test -race ./...), the render property tests without it
	$(GO) test -race -skip '^($(PROPERTY_TESTS))$$' $(GOTESTFLAGS) ./...
	$(GO) test -run '^($(PROPERTY_TESTS))$$' $(GOTESTFLAGS) ./templates/... ./renderworker/

integration: build ## Run test/integration against the local plane (started and stopped if not up)
	@if [ -z "$$(find test/integration -name '*.go' 2>/dev/null)" ]; then \
	  echo "integration: no Go files in test/integration yet; nothing to run"; \
	else \
	  $(WITH_CLUSTER) $(GO) test -tags integration -count=1 -v $(GOTESTFLAGS) ./test/integration/...; \
	fi

smoke: tools build ## Run the kubectl scenarios test/smoke/*.sh against the local plane (SMOKE=name to pick)
	$(WITH_CLUSTER) $(CLUSTER)/smoke.sh $(SMOKE)

# Scenario names for make faults, e.g. FAULTS=stencil-kill; empty runs them all.
FAULTS ?=

faults: tools build ## Run the fault scenarios test/faults/*.sh against the local plane, one at a time (FAULTS=name to pick)
	$(GO) build -o bin/countproxy ./test/faults/countproxy
	$(GO) build -o bin/faultcheck ./test/faults/faultcheck
	$(GO) build -o bin/hostile ./test/hostile/gen
	$(WITH_CLUSTER) $(CLUSTER)/faults.sh $(FAULTS)

rbac-check: tools build ## Show every rule of deploy/base/clusterrole.yaml and deploy/base/role.yaml is needed: remove each, the least-privilege scenario must fail
	$(WITH_CLUSTER) $(CLUSTER)/rbac-check.sh

monitoring-check: promtool ## Check and unit-test deploy/monitoring's alert rules with promtool (the endpoints smoke scenario checks a live /metrics)
	bin/promtool check rules --lint=all --lint-fatal deploy/monitoring/rules.yaml
	bin/promtool test rules deploy/monitoring/rules_test.yaml

# Fuzz targets for make fuzz, each PACKAGE:TARGET, and how long each runs.
FUZZ ?= ./renderworker:FuzzWall ./renderworker:FuzzEncodeString ./renderworker:FuzzSameInTwoWorkers ./templates:FuzzRenderBudget ./templates/chart:FuzzChartBudget ./templates/chart:FuzzChartShape ./templates/chart:FuzzChartSecret ./templates:FuzzRenderHostileValues ./templates:FuzzRender ./config:FuzzParseConfig ./templates:FuzzReadsStayInTheNamespace ./templates/chart:FuzzSplitDocumentsAsHelm ./templates:FuzzChartMatchesHelm ./templates:FuzzSeesStatus
FUZZTIME ?= 10m

# The budget targets render under the default budget here (their seeds,
# in make unit, under a tenth of it). A finding is written under the
# package's testdata/fuzz/TARGET/; commit it as a seed.
fuzz: ## Run each fuzz target (FUZZ) for FUZZTIME (default 10m) with the default render budget
	@for t in $(FUZZ); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "fuzz: $$name in $$pkg for $(FUZZTIME)"; \
	  STENCIL_FUZZ_BUDGET=default $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  echo "fuzz: $$name corpus: $$(ls $$pkg/testdata/fuzz/$$name 2>/dev/null | wc -l) committed seeds, $$(ls $$($(GO) env GOCACHE)/fuzz/stencil.dev/stencil/$${pkg#./}/$$name 2>/dev/null | wc -l) in the cache"; \
	done

# The commit BenchmarkMemory compares this tree's memory with: the last one
# before the lean caches (issue 15), whose figures the issue calls "today's".
BENCH_BASELINE_REF ?= e832118
# Benchmarks to run, a go test -bench pattern (e.g. BENCH=Converge).
BENCH ?= .

bench: tools build ## Run the benchmarks: unit (no cluster), then BenchmarkConverge, BenchmarkDependsOn, BenchmarkMemory, BenchmarkDiff, BenchmarkRing and BenchmarkReadFanOut on the local plane (STENCIL_BENCH_CRS=10000 for full size)
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem $(GOTESTFLAGS) ./...
	rm -rf bin/baseline-src && mkdir -p bin/baseline-src
	git archive $(BENCH_BASELINE_REF) | tar -x -C bin/baseline-src
	cd bin/baseline-src && $(GO) build -o ../stencil-baseline ./cmd/stencil
	STENCIL_BENCH_BIN=$(CURDIR)/bin/stencil STENCIL_BENCH_BASELINE_BIN=$(CURDIR)/bin/stencil-baseline \
	STENCIL_BENCH_BASELINE_CONFIG=$(CURDIR)/bin/baseline-src/crds/stencil.yaml \
	  $(WITH_CLUSTER) $(GO) test -tags integration -run='^$$' -bench='$(BENCH)' -benchtime=1x -timeout=120m $(GOTESTFLAGS) ./test/integration/...

lint: ## Check formatting (gofmt), run go vet, and shellcheck every script
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*' -not -path './.cluster/*')); \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (make fmt):"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if [ -n "$$(find test/integration -name '*.go' 2>/dev/null)" ]; then \
	  echo "$(GO) vet -tags integration ./test/integration/..."; \
	  $(GO) vet -tags integration ./test/integration/...; \
	fi
	@command -v shellcheck >/dev/null || { echo "lint: shellcheck is missing (apt-get install shellcheck)"; exit 1; }
	shellcheck -x $$(git ls-files '*.sh') .ci/run

fmt: ## Format the Go code with gofmt
	gofmt -w $$(find . -name '*.go' -not -path './bin/*' -not -path './.cluster/*')

clean: ## Stop the local plane and remove bin/stencil, bin/stencil-test and .cluster (keeps the tools in bin/)
	$(CLUSTER)/down.sh
	rm -rf bin/stencil bin/stencil-test .cluster
