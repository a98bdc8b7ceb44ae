# PeerKit: the two commands a new user runs are `make demo` and `make test`.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=

.PHONY: all build test demo bench stress test-lan setup avahi clean

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

clean:
	rm -rf .build
