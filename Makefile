# PeerKit: the two commands a new user runs are `make demo` and `make test`.
SWIFT ?= swift
SWIFT_BUILD_FLAGS ?=

PREFIX ?= /usr/local
DESTDIR ?=
## The configuration `make install` builds; CONFIGURATION=debug installs a debug build.
CONFIGURATION ?= release
TOOLS = peerkit listrd listrctl
MAN_DIR = .build/man

.PHONY: all build test test-repeat testkit-consumer demo bench stress test-lan setup avahi clean fuzz fuzz-smoke install man docs

all: build

setup:
	@scripts/bootstrap

avahi: setup
	@scripts/avahi-up

build: setup
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)

## The adversarial suites (raw sockets against real clocks, memory and CPU read from /proc) run
## after the rest, on their own and one at a time: next to the whole suite, or next to each other
## (2,000 stalled handshakes take a core), their timings fail on 2 cores (see Documentation/Testing.md).
ISOLATED_TESTS = AdversarialTests
## Long randomized suites on the test network, which also run after the rest, one test at a time:
## beside the whole suite they take a core for a minute; alone, 8 seeds take 10 s. `make stress`
## runs them with 200 seeds (see Documentation/Testing.md).
RANDOMIZED_TESTS = SessionFaultScheduleTests

## make test: installs what is missing, starts a loopback-only avahi-daemon when none answers, runs every test
## (first the benchmark harness's own tests, which run no benchmark: under a second).
## The fuzz smoke run is not part of it (its sanitizer builds of every dependency take longer than the
## tests): run `make fuzz-smoke`; CI (.ci/run) runs both.
test: avahi
	@scripts/bench --self-test
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	PEERKIT_BIN_DIR="$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))" $(SWIFT) test --skip-build $(SWIFT_BUILD_FLAGS) --skip '$(ISOLATED_TESTS)' --skip '$(RANDOMIZED_TESTS)'
	PEERKIT_BIN_DIR="$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))" $(SWIFT) test --skip-build $(SWIFT_BUILD_FLAGS) --filter '$(ISOLATED_TESTS)|$(RANDOMIZED_TESTS)' --no-parallel

## The integration suites: real sockets, an avahi-daemon, processes and wall-clock deadlines
## (Tests/PeerKitTests/Integration, Tests/ListrTests/EndToEnd and Adversarial). Every other suite is
## a unit suite: no sleeps, no wall-clock deadlines (TestNetwork, TestClock, embedded channels).
INTEGRATION_TESTS = AdmissionTests|ChatSampleTests|CertificateTests|InspectorCertificateTests|GroupWireTests|TransceiverGroupTests|TransceiverLifecycleTests|TransceiverMetricsTests|ListrMetricsEndpointTests|ResourceTransferTests|ResourceRawPeerTests|ResourceThrottledLinkTests|AvahiDaemonFailureTests|AvahiDiscoveryTests|AvahiTransceiverTests|CrossProcessTests|InstallScriptTests|ListrAdversarialTests|ListrEndToEndTests|ListrSecurityTests|ListrStoreEndToEndTests|ListrWatchEndToEndTests|ListrWithoutDiscoveryTests|ListrctlOptionTests|ListrdNotifyTests|PeerEventStreamTests|PeerkitInspectorTests|PreSharedKeyTests|ProtocolPythonClientTests|RawMessageTests|ReadmeSnippetTests|ServiceUnitTests|TransceiverAdversarialTests|TransceiverConnectionTests|TransceiverEdgeTests|TransceiverMessagingTests|SimultaneousDialTests|ListrOutboundBoundAdversarialTests|HandshakeSlotAdversarialTests|ResourceSlotTests|ListrCrossConnectionAdversarialTests|ListrUploadAdversarialTests|DialEveryEndpointTests|ListrLimitsEndToEndTests|ListrLimitsAdversarialTests|ListrPreHelloFrameTests|AdmissionLifetimeTests
REPEAT ?= 100

## make test-repeat: the unit suites REPEAT times (default 100), each a fresh `swift test`; prints
## the wall time and how many runs failed (and keeps their output). Needs no avahi-daemon.
test-repeat: setup
	$(SWIFT) build --build-tests $(SWIFT_BUILD_FLAGS)
	@SWIFT="$(SWIFT)" SWIFT_BUILD_FLAGS="$(SWIFT_BUILD_FLAGS)" scripts/test-repeat $(REPEAT) '$(INTEGRATION_TESTS)'

## make testkit-consumer: a new package that depends on PeerKitTesting compiles and runs Testing.md's
## chat example, cut out of the page (slow: it builds PeerKit and its dependencies afresh).
testkit-consumer: setup
	@SWIFT="$(SWIFT)" scripts/testkit-consumer

## make demo: starts listrd on a temporary store and drives it with listrctl.
demo: avahi
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)
	@scripts/demo "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))"

## make test-lan: real mDNS between simulated hosts (network namespaces); needs root.
test-lan: setup
	$(SWIFT) build $(SWIFT_BUILD_FLAGS)
	@scripts/lan-test "$$($(SWIFT) build --show-bin-path $(SWIFT_BUILD_FLAGS))"

## make stress: 64 `peerkit node` processes in a full mesh, one broadcasting 1,000 messages, in debug and release builds;
## then 100 pairs of transceivers that dial each other at once and send and request at once; then 100 clients
## during 64, then 2,000, stalled handshakes; then 200 seeded fault schedules for two peers with sessions.
stress: setup
	@scripts/stress

## make bench: release-build benchmarks with baselines measured in the same run.
bench: avahi
	@TOOL_BUILD_FLAGS="$(TOOL_BUILD_FLAGS)" scripts/bench

## make fuzz: libFuzzer (with AddressSanitizer) on the frame decoder, the connection and peer state machines and
## the JSON decoder: FUZZ_RUNS executions in total (default 10 million); any crash, leak or input
## slower than 1 s fails. make fuzz-smoke runs each for FUZZ_SMOKE_SECONDS (default 5) seconds.
fuzz:
	@scripts/fuzz run

fuzz-smoke:
	@scripts/fuzz smoke

## How the installed tools are built: with the Swift runtime and Foundation linked in, so that they
## do not load them from the toolchain (which may move, be upgraded or be absent where they are
## copied to) and start about 10 ms sooner; in a scratch path of their own, so that the everyday
## `swift build -c release` is not rebuilt each time one or the other runs. `make bench` measures
## the tools built this way.
TOOL_BUILD_FLAGS = --static-swift-stdlib --scratch-path .build/static

## make install PREFIX=/usr/local: the three tools, their man pages and shell completions, and
## listrd's systemd unit (see Documentation/Listr.md, "Running listrd as a service").
install: setup man
	for tool in $(TOOLS); do $(SWIFT) build -c $(CONFIGURATION) --product $$tool $(TOOL_BUILD_FLAGS) $(SWIFT_BUILD_FLAGS) || exit 1; done
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" packaging/install.sh "$$($(SWIFT) build -c $(CONFIGURATION) $(TOOL_BUILD_FLAGS) --show-bin-path $(SWIFT_BUILD_FLAGS))" $(MAN_DIR)

## make man: man pages for the three tools, from their ArgumentParser definitions, in .build/man
## (argument-parser's generate-manual plugin; it builds the package in $(CONFIGURATION) first).
man: setup
	$(SWIFT) package generate-manual --configuration $(CONFIGURATION) $(SWIFT_BUILD_FLAGS)
	rm -rf $(MAN_DIR) && mkdir -p $(MAN_DIR)
	for tool in $(TOOLS); do cp .build/plugins/GenerateManual/outputs/$$tool/$$tool.1 $(MAN_DIR)/ || exit 1; done

## make docs: the DocC documentation of PeerKit; fails on any DocC warning.
docs: setup
	rm -rf .build/docs/PeerKit.doccarchive && mkdir -p .build/docs
	$(SWIFT) package --allow-writing-to-directory .build/docs generate-documentation --target PeerKit \
		--warnings-as-errors --output-path .build/docs/PeerKit.doccarchive
	@echo "DocC archive: .build/docs/PeerKit.doccarchive (preview: swift package --disable-sandbox preview-documentation --target PeerKit)"

clean:
	rm -rf .build .build-fuzz
