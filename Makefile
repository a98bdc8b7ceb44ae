# PeerKit: the two commands a new user runs are `make demo` and `make test`.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=

.PHONY: all build test demo bench stress test-lan setup avahi clean fuzz fuzz-smoke

all: build

setup:
	@scripts/bootstrap

avahi: setup
	@scripts/avahi-up

build: setup
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

## make test: installs what is missing, starts a loopback-only avahi-daemon when none answers, runs every test.
test: avahi
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	PEERKIT_BIN_DIR="$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))" $(SWIFT) test --skip-build $(SWIFT_BUILD_FLAGS)

## make demo: starts listrd on a temporary store and drives it with listrctl.
demo: avahi
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)
	@scripts/demo "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))"

## make test-lan: real mDNS between simulated hosts (network namespaces); needs root.
test-lan: setup
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)
	@scripts/lan-test "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))"

## make stress: 64 peerkit-node processes in a full mesh, one broadcasting 1,000 messages, in debug and release builds.
stress: setup
	@scripts/stress

## make bench: release-build benchmarks with baselines measured in the same run.
bench: avahi
	@scripts/bench

## make fuzz: libFuzzer (with AddressSanitizer) on the frame decoder, the connection state machine and
## the JSON decoder: FUZZ_RUNS executions in total (default 10 million); any crash, leak or input
## slower than 1 s fails. make fuzz-smoke runs each for FUZZ_SMOKE_SECONDS (default 5) seconds.
fuzz:
	@scripts/fuzz run

fuzz-smoke:
	@scripts/fuzz smoke

clean:
	rm -rf .build .build-fuzz
