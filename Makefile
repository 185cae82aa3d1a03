# mqgate — build, generate, test.
# The two commands a new user needs: `make run` and `make test`.

SHELL      := /bin/bash
GO         ?= go
BIN        := $(CURDIR)/.bin
BUF_VERSION := v1.75.0
BUF        := $(BIN)/buf
DATA_DIR   ?= ./data
export PATH := $(BIN):$(PATH)

# The repository holds three modules (go.work ties them together): the
# server at the root, the generated API code in gen/ and the Go SDK in
# sdk/. `./...` at the root stops at a nested module, so every target that
# means "all the code" names the three. internal/peerbench/nats, a module
# of its own that only bench-nats runs, is left out on purpose (see its
# README).
PKGS       := ./... ./gen/... ./sdk/...

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: build
build: ## build the mqgate binary into ./mqgate
	$(GO) build -o mqgate ./cmd/mqgate

.PHONY: run
run: build ## run mqgate with embedded defaults (data in ./data, topics/groups auto-created)
	./mqgate serve --data-dir $(DATA_DIR) --auto-create

.PHONY: test
test: ## run every test (unit, race, fuzz seeds, end to end); installs what the end-to-end tests drive (.ci/deps) when root on Debian, and skips the tests whose system packages are missing elsewhere (CI=true fails them)
	@./.ci/deps
	# Every package but the end-to-end ones under -race: the official
	# RocketMQ clients those drive race internally, so they run next,
	# without -race (the server they start is built normally too).
	$(GO) test -race -count=1 -timeout 40m $$($(GO) list $(PKGS) | grep -v '/internal/e2e')
	$(GO) test -count=1 -timeout 30m ./internal/e2e/...

NEMESIS_DURATION ?= 10m
NEMESIS_SEED     ?=
NEMESIS_GROUPS   ?=
NEMESIS_MEMBERS  ?=
NEMESIS_REPLICAS ?=
NEMESIS_TIMEOUT  ?= 60m

.PHONY: nemesis
nemesis: ## the cluster nemesis test with NEMESIS_DURATION of faults (default 10m; make test runs it for 40s, once with one data group and once with three); NEMESIS_SEED=N replays a run; NEMESIS_GROUPS=G creates the cluster with G data groups, NEMESIS_MEMBERS=N of N members, NEMESIS_REPLICAS=R with --group-replicas R
	MQGATE_NEMESIS_DURATION=$(NEMESIS_DURATION) MQGATE_NEMESIS_SEED=$(NEMESIS_SEED) MQGATE_NEMESIS_GROUPS=$(NEMESIS_GROUPS) \
	MQGATE_NEMESIS_MEMBERS=$(NEMESIS_MEMBERS) MQGATE_NEMESIS_REPLICAS=$(NEMESIS_REPLICAS) \
		$(GO) test -count=1 -v -run '^TestNemesis$$' -timeout $(NEMESIS_TIMEOUT) ./internal/e2e/cluster/

KILL_ROUNDS ?= 20
KILL_SEED   ?=

.PHONY: kill-rounds
kill-rounds: ## kill -9 a random member of a five-member cluster with replica sets KILL_ROUNDS times under ordered and delayed sends (default 20; make test runs 3): per-group failover at the client, leaders spread again, nothing acknowledged lost or delivered again; KILL_SEED=N replays a run's choices
	MQGATE_KILL_ROUNDS=$(KILL_ROUNDS) MQGATE_KILL_SEED=$(KILL_SEED) \
		$(GO) test -count=1 -v -run '^TestClusterReplicaSetsKillRounds$$' -timeout 60m ./internal/e2e/cluster/

.PHONY: test-short
test-short: ## quick tests only (skips end-to-end and crash loops)
	$(GO) test -short -count=1 $(PKGS)

FUZZTIME ?= 10s

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 10s; not part of make test); a failing input is kept in the package's testdata/fuzz
	@failed=""; for pkg in $$($(GO) list $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$target"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg || failed="$$failed $$pkg.$$target"; \
		done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that failed:$$failed"; exit 1; fi

$(BUF):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)

.PHONY: tools
tools: $(BUF) ## install pinned buf into .bin (protoc plugins are go.mod tools)

# The OpenAPI document is also copied next to the HTTP listener, which embeds
# it for /openapi.json (go:embed cannot reach gen/ from gateway/httpserver).
OPENAPI_JSON := gen/openapi/mqgate.swagger.json
OPENAPI_EMBED := gateway/httpserver/openapi.json

.PHONY: generate
generate: $(BUF) ## regenerate gen/ from proto/ (byte for byte)
	mkdir -p gen && find gen -mindepth 1 -maxdepth 1 ! -name README.md ! -name go.mod ! -name go.sum -exec rm -rf {} +
	$(BUF) generate
	cp $(OPENAPI_JSON) $(OPENAPI_EMBED)

.PHONY: check-generated
check-generated: $(BUF) ## fail when gen/ is stale (regenerates into a temp dir and diffs)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(BUF) generate -o "$$tmp" && \
	if ! diff -r -x README.md -x go.mod -x go.sum gen "$$tmp/gen" >"$$tmp/diff"; then \
		echo "gen/ is stale: run 'make generate' and commit the result"; \
		head -n 40 "$$tmp/diff"; exit 1; fi; \
	if ! cmp -s "$$tmp/$(OPENAPI_JSON)" $(OPENAPI_EMBED); then \
		echo "$(OPENAPI_EMBED) is stale: run 'make generate' and commit the result"; exit 1; fi

# The peer protocol between cluster members must stay compatible with the
# previous release's (members of both meet during an upgrade): its image as
# released is kept in proto/mqgate/cluster/release.binpb.
PEER_RELEASE := proto/mqgate/cluster/release.binpb

.PHONY: check-breaking
check-breaking: $(BUF) ## fail when the cluster peer protocol breaks the last release's (buf breaking)
	$(BUF) breaking --against $(PEER_RELEASE)

.PHONY: release-peer-protocol
release-peer-protocol: $(BUF) ## record the cluster peer protocol as released (run when tagging a release)
	$(BUF) build --path proto/mqgate/cluster -o $(PEER_RELEASE)

.PHONY: lint
lint: $(BUF) ## buf lint + go vet + gofmt
	$(BUF) lint
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))" || (gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'); exit 1)

.PHONY: bench
bench: build ## mqgate bench (produce async+sync, batched and with the SDK's batching, consume batched and single acks, e2e) against the echo ceilings, then Go benchmarks
	./mqgate bench produce --flush async --rounds 3
	./mqgate bench produce --flush sync --rounds 3
	./mqgate bench produce --batch 32 --duration 5s --rounds 3
	./mqgate bench produce --sdk-linger 1ms --duration 5s --rounds 3
	./mqgate bench consume --backlog 200000 --duration 5s --rounds 3
	./mqgate bench consume --ack-batch 32 --pipeline-acks=false --backlog 200000 --duration 5s --rounds 3
	./mqgate bench consume --ack-batch 1 --pipeline-acks=false --backlog 100000 --duration 5s --rounds 3
	./mqgate bench e2e --rate 5000 --rounds 3
	$(GO) test -run '^$$' -bench . -benchtime 2s $(PKGS)

# Cluster capacity: real members, each in a cgroup of its own, driven by 16
# official Go producers; configurations alternated round by round
# (internal/e2e/capacity). Needs root and writable cgroups.
BENCH_CONFIGS ?= single --flush sync;cluster
BENCH_CPUS ?= 0
BENCH_ROUNDS ?= 3
BENCH_DURATION ?= 10s

.PHONY: bench-cluster
bench-cluster: ## cluster capacity: single node and cluster alternated (BENCH_CONFIGS, BENCH_CPUS=0.3 caps each member, BENCH_ROUNDS, BENCH_DURATION)
	set -o pipefail; MQGATE_BENCH_CLUSTER=1 MQGATE_BENCH_CONFIGS='$(BENCH_CONFIGS)' MQGATE_BENCH_CPUS='$(BENCH_CPUS)' \
	MQGATE_BENCH_ROUNDS='$(BENCH_ROUNDS)' MQGATE_BENCH_DURATION='$(BENCH_DURATION)' \
	$(GO) test -count=1 -timeout 3h -run '^TestCapacity$$' -v ./internal/e2e/capacity/ | grep -v -e '^=== ' -e '^--- PASS' -e '^    --- PASS'

.PHONY: bench-nats
bench-nats: build ## NATS JetStream's pipelined async publish against mqgate bench produce --sdk-linger, alternated (its own module: internal/peerbench/nats)
	cd internal/peerbench/nats && GOWORK=off $(GO) run . --mqgate $(CURDIR)/mqgate --rounds 3

.PHONY: bench-storage
bench-storage: ## storage benchmarks with ratios against raw disk
	$(GO) test -run '^$$' -bench . -benchtime 2s ./storage/...
