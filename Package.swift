// swift-tools-version:6.2
// 6.2: `SendableMetatype` in PeerKit's API, `.strictMemorySafety()` below.
import PackageDescription

/// Settings that keep the library honest. `StrictMemorySafety` (SE-0458) is not on for PeerKit yet:
/// the Avahi bindings need `unsafe` markers on their C calls first; `MemberImportVisibility` needs
/// explicit imports in a few files. Both are on for the JSON codec (PeerKitJSON) and the tools below.
let librarySettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

/// Settings that keep the tools honest: upcoming features the code already follows, and warnings
/// for every unsafe construct (SE-0458) so that new ones are seen in review.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .strictMemorySafety(),
]

let package = Package(
    name: "PeerKit",
    // Linux is where PeerKit is built and tested (Debian, Swift 6.3, Avahi). macOS 15 is the minimum
    // of the APIs used (Synchronization's Atomic and Mutex); a macOS build also needs Avahi's client
    // library (untested).
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PeerKit", targets: ["PeerKit"]),
        // For an app's test target (not the app): TestNetwork, FakePeer, a TestClock, faults on demand.
        .library(name: "PeerKitTesting", targets: ["PeerKitTesting"]),
        .executable(name: "peerkit", targets: ["peerkit"]),
        .executable(name: "listrd", targets: ["listrd"]),
        .executable(name: "listrctl", targets: ["listrctl"]),
        .executable(name: "chat", targets: ["chat"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // `swift package generate-documentation --target PeerKit` (make docs) and the man pages.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        // PeerKit reports through the swift-metrics API only; listrd's `--metrics-port` serves
        // whatever it records as Prometheus text.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // `.certificates` security mode: self-signed identities, PEM, chain verification.
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // TestClock for PeerKitTesting and the tests only; PeerKit itself takes any Clock<Duration>.
        .package(url: "https://github.com/pointfreeco/swift-clocks.git", from: "1.1.1"),
        // Deque: the dispatcher's queues move messages out instead of copying them (NIO's own
        // dependency, so nothing more to build).
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
    ],
    targets: [
        // Avahi's client library, seen through a module map. Only PeerKit/Discovery imports it.
        .systemLibrary(
            name: "CAvahi",
            pkgConfig: "avahi-client",
            providers: [.apt(["libavahi-client-dev"])]
        ),
        // The JSON codec: a scanner over a payload's bytes in place, a Codable decoder and encoder on
        // it. Its own target so that its unsafe pointer code is checked with strict memory safety
        // (every unsafe expression marked and reviewed) while the rest of PeerKit is not yet.
        .target(
            name: "PeerKitJSON",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "PeerKit",
            dependencies: [
                "CAvahi", "PeerKitJSON",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                // Resources: chunked reads, and a received file that appears under its name only
                // when complete (transactional creation). Its product name still has the underscore.
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: librarySettings
        ),
        // The test kit: real transceivers over in-memory connections, scripted discovery, a test
        // clock, faults on demand, FakePeer. Only tests depend on it.
        .target(
            name: "PeerKitTesting",
            dependencies: [
                "PeerKit",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: librarySettings
        ),
        // What the three tools share: the exit-status table.
        .target(
            name: "ToolSupport",
            dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strictSettings
        ),
        // The inspector: browse, tail, send, request, ping for any service type; `node` for scripts.
        .executableTarget(
            name: "peerkit",
            dependencies: [
                "PeerKit", "ToolSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),

        // The README's snippet, verbatim: it must compile as pasted (a test checks they match).
        .executableTarget(
            name: "readme-snippet",
            dependencies: ["PeerKit"],
            path: "Examples/ReadmeSnippet"
        ),

        // The sample to read in one sitting: a terminal chat (rooms, direct messages, /who, a
        // passphrase key, the event stream), in one file of under 300 lines.
        .executableTarget(
            name: "chat",
            dependencies: [
                "PeerKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/Chat",
            swiftSettings: strictSettings
        ),

        // MARK: Listr example (uses PeerKit only as a library)
        .target(
            name: "ListrKit",
            dependencies: [
                "PeerKit",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/ListrKit",
            swiftSettings: librarySettings
        ),
        .executableTarget(
            name: "listrd",
            dependencies: [
                "ListrKit", "PeerKit", "ToolSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            path: "Examples/listrd",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "listrctl",
            dependencies: [
                "ListrKit", "PeerKit", "ToolSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Examples/listrctl",
            swiftSettings: strictSettings
        ),

        // MARK: Benchmarks
        .executableTarget(
            name: "peerkit-bench",
            dependencies: [
                "PeerKit",
                // The JSON floor times PeerKit's codec against Foundation's.
                "PeerKitJSON",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The NIO mesh's frame decoder.
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Benchmarks/peerkit-bench"
        ),

        // MARK: Tests
        .testTarget(
            name: "PeerKitTests",
            dependencies: [
                "PeerKit", "PeerKitJSON", "PeerKitTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Clocks", package: "swift-clocks"),
            ]
        ),
        .testTarget(
            name: "ListrTests",
            dependencies: [
                "ListrKit", "PeerKit", "PeerKitTesting", "ToolSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
