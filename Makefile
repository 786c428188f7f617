# Larder: `make run` serves on the embedded defaults, `make test` runs every test.
SWIFT ?= swift
CONFIG ?=
RUN_ARGS ?=
FUZZ_SECONDS ?= 30

.PHONY: all deps build release run test bench fuzz format lint tsan clean

all: build

deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

## run: build release and serve on 127.0.0.1:3128 (admin 127.0.0.1:3129) until Ctrl-C
run: release
	.build/release/larder serve $(if $(CONFIG),--config $(CONFIG)) $(RUN_ARGS)

## test: unit and integration tests (builds the binary the integration tests start), then a
## short libFuzzer run of every target (FUZZ_SECONDS each, 30 by default)
test: deps test-deps lint
	$(SWIFT) build
	$(SWIFT) test
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh
	scripts/tsan.sh

## format: rewrite the sources in the house style (.swift-format)
format:
	$(SWIFT) format format --in-place --configuration .swift-format -r Sources Tests Fuzz Package.swift

## lint: fail on anything `make format` would change or the style rules flag
lint:
	$(SWIFT) format lint --strict --configuration .swift-format -r Sources Tests Fuzz Package.swift

## tsan: the concurrent parts (event loops, disk threads, coalescer) under ThreadSanitizer
tsan: deps test-deps
	scripts/tsan.sh

## fuzz: run every libFuzzer target for FUZZ_SECONDS (make fuzz FUZZ_SECONDS=600)
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

## bench: wrk through the proxy on a local origin (docs/PERFORMANCE.md, "Reproducing")
bench: release
	Benchmarks/run.sh

clean:
	rm -rf .build
