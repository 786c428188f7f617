# Larder: `make run` serves on the embedded defaults, `make test` runs every test.
SWIFT ?= swift
CONFIG ?=
RUN_ARGS ?=
FUZZ_SECONDS ?= 30

.PHONY: all deps build release run test bench fuzz format lint tsan clean install deb release-test

# make install: where the files go (DESTDIR stages them into a folder, as make deb does).
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
BINARY ?= .build/release/larder
# The Swift runtime is linked in (--static-swift-stdlib) and no RUNPATH points into the build
# folder or the toolchain: the binary needs only Debian's libraries (scripts/release-test.sh).
# Full RELRO (-z relro -z now): the GOT is read-only once the process has started.
# Package.resolved is committed: every build uses the versions it pins and fails rather than
# resolve others (--force-resolved-versions).
PINNED = --force-resolved-versions
RELEASE_FLAGS = $(PINNED) -c release --product larder --static-swift-stdlib --disable-local-rpath \
    -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now

all: build

deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

build: deps
	$(SWIFT) build $(PINNED)

## release: the self-contained binary, .build/release/larder
release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

## install: binary, systemd units, configuration (kept if present), logrotate snippet, man page
## and docs under $(DESTDIR)$(PREFIX); run after make release (sudo make install)
install:
	BINARY=$(BINARY) PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) SYSCONFDIR=$(SYSCONFDIR) scripts/install.sh

## deb: a Debian package of the release binary in .build/deb/ (dpkg-deb; see docs/OPERATIONS.md)
deb: release
	scripts/make-deb.sh $(BINARY)

## run: build release and serve on 127.0.0.1:3128 (admin 127.0.0.1:3129) until Ctrl-C
run: release
	.build/release/larder serve $(if $(CONFIG),--config $(CONFIG)) $(RUN_ARGS)

## test: lint, unit and integration tests (builds the binary the integration tests start), a
## short libFuzzer run of every target (FUZZ_SECONDS each, 30 by default), the ThreadSanitizer
## run, then the release test (scripts/release-test.sh)
test: deps test-deps lint
	$(SWIFT) build $(PINNED)
	$(SWIFT) test $(PINNED)
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh
	scripts/tsan.sh
	scripts/release-test.sh

## release-test: build the release binary from the Dockerfile's COPY files, check it needs no
## toolchain, package it, install the package into a scratch root and run lintian on it
release-test: deps test-deps
	scripts/release-test.sh

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
