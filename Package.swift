// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "PeerKit",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "PeerKit", targets: ["PeerKit"]),
        .executable(name: "peerkit-node", targets: ["peerkit-node"]),
        .executable(name: "listrd", targets: ["listrd"]),
        .executable(name: "listrctl", targets: ["listrctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
    ],
    targets: [
        // Avahi's client library, seen through a module map. Only PeerKit/Discovery imports it.
        .systemLibrary(
            name: "CAvahi",
            pkgConfig: "avahi-client",
            providers: [.apt(["libavahi-client-dev"])]
        ),
        .target(
            name: "PeerKit",
            dependencies: [
                "CAvahi",
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
            ]
        ),
        // A diagnostic node: joins a service type, prints events as JSON lines, takes commands on stdin.
        .executableTarget(
            name: "peerkit-node",
            dependencies: [
                "PeerKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // The README's snippet, verbatim: it must compile as pasted (a test checks they match).
        .executableTarget(
            name: "readme-snippet",
            dependencies: ["PeerKit"],
            path: "Examples/ReadmeSnippet"
        ),

        // MARK: Listr example (uses PeerKit only as a library)
        .target(
            name: "ListrKit",
            dependencies: ["PeerKit"],
            path: "Examples/ListrKit"
        ),
        .executableTarget(
            name: "listrd",
            dependencies: [
                "ListrKit", "PeerKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Examples/listrd"
        ),
        .executableTarget(
            name: "listrctl",
            dependencies: [
                "ListrKit", "PeerKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/listrctl"
        ),

        // MARK: Benchmarks
        .executableTarget(
            name: "peerkit-bench",
            dependencies: [
                "PeerKit",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/peerkit-bench"
        ),

        // MARK: Tests
        .testTarget(
            name: "PeerKitTests",
            dependencies: [
                "PeerKit",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "ListrTests",
            dependencies: [
                "ListrKit", "PeerKit",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
