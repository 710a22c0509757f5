# topk: the two commands a new user needs are `make run` and `make test`.
# Both install what is missing first (scripts/install-deps.sh: redis-server 7
# and postgresql through apt; for make test also gcc and libc6-dev for -race
# and a Chromium for the page test); neither needs Docker, Kafka, or a running
# Redis or PostgreSQL.

GO      ?= go
BIN     := bin/topk
BENCH   := bin/topk-bench
ARGS    ?=

.PHONY: run test bench build deps test-deps vet fmt-check clean

## run: build topk, start a local Redis and an in-process Kafka broker,
##      generate traffic and show the live rankings (Ctrl-C stops everything).
##      Extra flags: make run ARGS="--rate 50000 --duration 1m"
run: deps build
	$(BIN) run --config config/topk.yaml $(ARGS)

## test: vet and the whole test suite (with the race detector); the tests
##       start the redis-server and Kafka broker they need themselves.
test: test-deps vet
	$(GO) test -race -count=1 ./...

## bench: the end-to-end pipeline benchmark (workload A at 200,000 events/s
##        against the naive design, medians of 3 runs) and the global-view
##        accuracy harness; see BENCHMARKS.md. Takes about 15 minutes.
##        The harness is its own binary, bin/topk-bench (cmd/topk-bench),
##        so that the service carries none of it.
bench: deps
	$(GO) build -o $(BENCH) ./cmd/topk-bench
	$(BENCH) pipeline --workload A --rate 200000 --duration 60s --warmup 10s --workers 2 --partitions 8 --naive --runs 3
	$(BENCH) accuracy

build:
	$(GO) build -o $(BIN) ./cmd/topk

## deps: what make run needs (redis-server 7, redis-cli, postgresql).
deps:
	@scripts/install-deps.sh run

## test-deps: that, and what make test needs: a C compiler with libc headers
##            (go test -race uses cgo) and a Chromium (pkg/api's page test).
test-deps:
	@scripts/install-deps.sh test

vet:
	$(GO) vet ./...

## fmt-check: fail if any Go file is not gofmt-formatted.
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf bin
