# Strand's build entry points. `make test` runs every test; `make run` starts
# a local cluster (once the node binary exists). See README.md.

SHELL         := /bin/bash
GO            ?= go
STATICCHECK_VERSION := v0.8.2
# staticcheck at the pinned version, installed into ./bin by `make lint` when missing.
STATICCHECK   ?= bin/staticcheck-$(STATICCHECK_VERSION)
# A real S3 server for objstore/s3store's tests (Versity's S3 gateway over a directory), installed into
# ./bin on first use from the module proxy; the tests start it on 127.0.0.1 themselves.
VERSITYGW_VERSION := v1.8.0
VERSITYGW     := bin/versitygw-$(VERSITYGW_VERSION)
FUZZTIME      ?= 10000x
SEEDS         ?= 1000
SEED_START    ?= 1
PROFILE       ?= mixed
V             ?= 1
BENCHTIME     ?= 2s
PROTOC_GEN_GO_VERSION := v1.36.12

# Every fuzz target, as package:FuzzName. CI runs each for $(FUZZTIME).
FUZZ_TARGETS := $(shell grep -rl --include='*_test.go' '^func Fuzz' . | xargs -r grep -H -o '^func Fuzz[A-Za-z0-9_]*' | sed -e 's|^\./||' -e 's|/[^/]*_test.go:func |:|' | sort)

.PHONY: all build test test-real test-sim test-simnet test-planted test-invariants test-faults lint fuzz bench bench-restart bench-cluster bench-txn bench-compact proto run sim sim-bugs tools

all: lint test

## test: every unit, model, scripted and simulation test (a CI-sized seed sample),
##   then the planted-bug tests, which only a -tags simbugs build can run: test-real and, beside it
##   at nice SIM_NICE (10), test-sim. Every suite runs even when an earlier one fails; the end names the failed
##   ones and fails. cmd/strand's tests wait on real processes most of the time (about 125 CPU-seconds
##   in 320 s on 2 cores), and test-sim uses the CPU they leave.
# Every planted-bug test (each exists only with -tags simbugs): the scripted symptoms (TestBug*)
# and every check that must catch its bug in the simulator.
PLANTED_BUG_TESTS := TestBug|TestSimCatches|TestWorkloadCatches|TestAuditCatches|TestDigestsCatch|TestRecoveryCheckCatches|TestStatusDigestCatches|TestRecreateCatches|TestCorruptionCatches
# The niceness test-sim runs at beside test-real (make test, .ci/run): real-time tests first.
SIM_NICE      ?= 10
test:
	@log=$$(mktemp); \
	nice -n $(SIM_NICE) $(MAKE) --no-print-directory test-sim >$$log 2>&1 & sim=$$!; \
	failed=(); \
	$(MAKE) --no-print-directory test-real || failed+=("test-real"); \
	wait $$sim || failed+=("test-sim"); \
	echo "make test-sim (run beside test-real at nice $(SIM_NICE)):"; cat $$log; rm -f $$log; \
	if [ $${#failed[@]} -gt 0 ]; then \
	  echo "make test: failed: $${failed[*]} (the summaries above name the suites)"; exit 1; \
	fi; \
	echo "make test: all 5 suites passed"

## test-real: the tests that run on the wall clock: every package but cmd/strand and simnet (node/server's
##   and clientlib's in-process clusters among them), node's again with the node-wide WAL (Config.WAL, a
##   production mode), then cmd/strand's real-process tests (three servers writing at full speed) on their
##   own: beside them, the in-process clusters of other packages' tests starve on 2 cores. Every suite
##   runs even when an earlier one fails.
test-real: $(VERSITYGW)
	@failed=(); \
	$(GO) test -count=1 -timeout 15m $$($(GO) list ./... | grep -v -e '/cmd/strand$$' -e '/simnet$$') || failed+=("packages other than cmd/strand and simnet"); \
	$(GO) test -count=1 -timeout 5m ./node/ -node.wal || failed+=("node with the node-wide WAL (-node.wal)"); \
	$(GO) test -count=1 -timeout 15m ./cmd/strand/ || failed+=("cmd/strand"); \
	if [ $${#failed[@]} -gt 0 ]; then \
	  echo "make test-real: $${#failed[@]} of 3 suites failed:"; printf '  %s\n' "$${failed[@]}"; exit 1; \
	fi; \
	echo "make test-real: all 3 suites passed"

## test-sim: the tests on the simulator's virtual time: simnet's package (the standard seed sample among
##   them; test-simnet), then the planted-bug tests (-tags simbugs; test-planted). No check reads the wall
##   clock, so starving them (make test and CI run them niced beside test-real) only makes them longer:
##   hence the longer timeout. Both suites run even when the first fails. CI runs the two halves in
##   separate lanes.
test-sim:
	@failed=(); \
	$(MAKE) --no-print-directory test-simnet || failed+=("simnet"); \
	$(MAKE) --no-print-directory test-planted || failed+=("planted bugs (-tags simbugs)"); \
	if [ $${#failed[@]} -gt 0 ]; then \
	  echo "make test-sim: $${#failed[@]} of 2 suites failed:"; printf '  %s\n' "$${failed[@]}"; exit 1; \
	fi; \
	echo "make test-sim: all 2 suites passed"

## test-simnet: simnet's package, the 200-seed sample (TestSim, which also checks the sample's coverage) among it.
test-simnet:
	$(GO) test -count=1 -timeout 30m ./simnet/

## test-planted: every planted-bug test (PLANTED_BUG_TESTS, -tags simbugs) of every package that has one.
test-planted:
	$(GO) test -count=1 -timeout 30m -tags simbugs -run '$(PLANTED_BUG_TESTS)' ./node/ ./simnet/ ./engine/ ./engine/groups/ ./engine/txn/ ./engine/compact/ ./clientlib/ ./sasl/ ./kafkaproto/

## test-invariants: engine's and node's tests and a short simulator sample (TestSim's 20 seeds, features
##   drawn) with the `invariants` build tag, which checks the whole partition state after every applied
##   entry. simnet's scenario tests run without it in test-simnet (under it too they took about 100 of
##   the step's 190 CPU-seconds; the sample alone takes about 50).
test-invariants:
	$(GO) test -count=1 -short -tags invariants ./engine/... ./node/
	$(GO) test -count=1 -short -tags invariants -run '^TestSim$$' ./simnet/

## test-faults: real-process tests that need node/server's fault switch, compiled in only
##   with -tags faultinject (a node cut off from its peers, then healed, under load; a node whose
##   disk stalls, through the switch and through a FUSE device the test freezes, hands its
##   leaderships on; about two minutes).
test-faults:
	$(GO) test -count=1 -tags faultinject -run 'TestHealPartition|TestDiskStall' ./cmd/strand/

## lint: gofmt, go vet, staticcheck and go mod tidy must all be clean. staticcheck is installed
##   at its pinned version into ./bin on first use (needs the module proxy once).
lint: $(filter bin/%,$(STATICCHECK))
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run go mod tidy"; $(GO) mod tidy -diff; exit 1; }
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

## fuzz: run every fuzz target briefly (FUZZTIME each) on top of its checked-in corpus. Each package's
##   fuzz-instrumented test binary is built once (go test -c -fuzz=.) and run once per target from the
##   package's directory (its testdata/fuzz seeds, crashers written there) with go test's own corpus
##   cache (GOCACHE/fuzz/IMPORTPATH): what `go test -fuzz` does, without linking the binary again for
##   each of kafkaproto's 37 targets.
fuzz:
	@set -e; bins=$$(mktemp -d); trap 'rm -rf "$$bins"' EXIT; \
	cache=$$($(GO) env GOCACHE)/fuzz/$$($(GO) list -m); \
	for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; bin=$$bins/$${pkg//\//_}.test; \
	  [ -x "$$bin" ] || $(GO) test -c -fuzz=. -o "$$bin" ./$$pkg; \
	  echo "fuzz ./$$pkg $$name ($(FUZZTIME))"; \
	  (cd $$pkg && "$$bin" -test.paniconexit0 -test.timeout=10m -test.run='^$$' -test.fuzz="^$$name$$" \
	    -test.fuzztime=$(FUZZTIME) -test.fuzzcachedir="$$cache/$$pkg"); \
	done

## bench: Go benchmarks of raftlog (beside raw file+fsync rates) and the engine,
##   and node's checkpoint and restart costs at 1 M batches (about 15 s).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./raftlog/ ./engine/...
	$(GO) test -short -run '^$$' -bench '^BenchmarkRestart$$' -benchtime 3x -timeout 20m ./node/

## bench-restart: node's checkpoint and restart costs at 1 M and 10 M batches
##   (a few minutes; a temporary directory of about 1.5 GB), then restart time at
##   RESTART_BYTES of data per node (16 KiB batches, built straight through raftlog,
##   restarted in alternation; scaled down with a note when the disk is short; about
##   11 GB of temporary files and several minutes at the default).
RESTART_BYTES ?= 1GiB,10GiB
bench-restart:
	$(GO) test -run '^$$' -bench '^BenchmarkRestart$$' -benchtime 3x -timeout 60m ./node/
	$(GO) test -run '^$$' -bench '^BenchmarkRestartBytes$$' -benchtime 1x -timeout 60m ./node/ -restart.bytes $(RESTART_BYTES)

## sim: run SEEDS simulator seeds from SEED_START through the production (wire) path: the metadata
##   group, Core.Handle with marshalled protobuf and clientlib's retry logic; one after another, ending
##   with a coverage table and "sim: seeds=N failed=F ops=O events=E hash=H". PROFILE=safety|liveness|mixed;
##   BUG=AckBeforeCommit|SkipFsync|FetchBeyondHighMark|ReapplyAfterRestart|LocalRead|RestoreForgetsProducers|
##   CheckpointForgetsProducers|FetchRenumbersInsideBatch|AckLeaderEarly|RecoverTrustsPageCache|LeaseReads|
##   RestoreIndexTimes|TopicIDUnchecked|ProduceSkipsCRC|AckBeforeSyncDone|WipedNodeVotes|RepairTrustsItself|
##   CompactPastStart|StaleSnapshot|FirstBatchMustFit plants a bug; JOINS=1 joins nodes mid-run (3 of 5 start, Options.Joins);
##   FEATURES=0 runs without the per-seed feature draw (groups, moves, joins, growth, WAL, Kafka codec: simnet/features.go);
##   KNOBS=0 runs every seed with the simulator's old fixed node configuration (raft ticked every tick) instead of
##   the per-seed draw, production's timing the most common draw (simnet/knobs.go)
##   (built with -tags simbugs: production builds have no bug switch);
##   OUT=DIR keeps Porcupine's HTML of failing seeds; V=1 (default) prints each seed's options and figures.
sim:
	@# One mode only: the wire path production runs (there is no direct mode to choose).
	cd simnet && $(GO) test $(if $(BUG),-tags simbugs) -run '^TestSim$$' -count=1 -timeout 0 \
	  -sim.seeds=$(SEEDS) -sim.seed-start=$(SEED_START) -sim.profile=$(PROFILE) \
	  $(if $(BUG),-sim.bug=$(BUG)) $(if $(OUT),-sim.out=$(abspath $(OUT))) $(if $(filter 1,$(V)),-sim.v) \
	  $(if $(filter 1,$(JOINS)),-sim.joins) $(if $(filter 0,$(FEATURES)),-sim.features=false) $(if $(filter 0,$(KNOBS)),-sim.knobs=false)

## sim-bugs: the planted bugs' catch rates: each bug (BUGS=a,b,...; default every bug of simnet's
##   BugNames, GroupBugNames, OperatorBugNames and ClientBugNames) runs SEEDS seeds from SEED_START, each seed stopping
##   at its first failed check, and one table prints bug, caught/SEEDS, the first catching seed and the
##   catching seeds.
##   Issue 14 asks each bug to be caught in at least half the seeds (rows below half are marked).
BUGS ?=
sim-bugs:
	cd simnet && $(GO) test -tags simbugs -run '^TestSimCatchRate$$' -count=1 -timeout 0 \
	  -sim.catchrate=$(SEEDS) -sim.seed-start=$(SEED_START) -sim.profile=$(PROFILE) $(if $(BUGS),-sim.bugs=$(BUGS))

## bench-cluster: start three real `strand serve` processes on 127.0.0.1 (fsync before ack) and run
##   produce, consume, e2e at 1,000 and 5,000 msgs/s on 1 and 6 partitions, and a 2,000-partition
##   topic (creation, idle CPU, produce), printing one table with the servers' CPU and RSS (≤ ~5 min).
##   BINARY=PATH runs the servers from another build (e.g. main's) with this driver;
##   BENCH_ARGS passes more flags (e.g. BENCH_ARGS='--phases produce,e2e --duration 5s').
BENCH_ARGS    ?=
bench-cluster: build
	./bin/strand bench cluster $(if $(BINARY),--binary $(abspath $(BINARY))) $(BENCH_ARGS)

## bench-txn: bench-cluster's txn phase (≤ ~4 min): transactions of 1, 10 and 100 records on 1 and 6
##   partitions beside plain idempotent produce, then read back at read_uncommitted and read_committed,
##   3 rounds alternated, then msgs/s, commits/s and commit p50/p99 as min–max over the rounds.
bench-txn: build
	./bin/strand bench cluster --phases txn $(if $(BINARY),--binary $(abspath $(BINARY))) $(BENCH_ARGS)

## bench-compact: bench-cluster's compact phase (≤ ~1 min; issue 24): 10,000 keys updated 200,000 times with
##   1 KiB values, written in 4 alternated rounds to a compacted topic and a delete one (produce with compaction
##   running against without), then compaction throughput (MiB/s a replica, CPU) and disk use after settling
##   as a multiple of the live set (goal ≤ 2x). Full size:
##   BENCH_ARGS='--compact-updates 2000000' (about 2 GiB a topic, 6 GiB a node's disk in all: minutes).
bench-compact: build
	./bin/strand bench cluster --phases compact $(if $(BINARY),--binary $(abspath $(BINARY))) $(BENCH_ARGS)

## proto: regenerate proto/strandpb from proto/*.proto (protoc from Debian's protobuf-compiler).
proto:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" protoc --go_out=. --go_opt=module=github.com/strandlog/strand -I proto proto/*.proto

## build: the strand binary, in bin/, stamped with `git describe` and the commit (strand version prints them;
##   stamped here because GOFLAGS=-buildvcs=false, common in CI images, leaves the build info without one).
VERSION       ?= $(shell git describe --always --dirty 2>/dev/null)
COMMIT        ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
build:
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o bin/strand ./cmd/strand

## run: a local 3-node cluster in one process: Strand protocol on 127.0.0.1:9192-9194, Kafka on :9092-9094 (Ctrl-C stops it). See README.md.
run: build
	./bin/strand dev

## tools: install the pinned linters and the S3 test server into ./bin (make lint and make test-real do this
##   themselves when they are missing).
tools: $(filter bin/%,$(STATICCHECK)) $(VERSITYGW)

bin/staticcheck-$(STATICCHECK_VERSION):
	@mkdir -p bin
	GOBIN=$(abspath bin) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv bin/staticcheck $@

$(VERSITYGW):
	@mkdir -p bin
	GOBIN=$(abspath bin) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	mv bin/versitygw $@
