// swift-tools-version:6.0
// libFuzzer targets for PeerKit, a package of their own so that the main package's builds never
// see them. Build and run them with scripts/fuzz (make fuzz / make fuzz-smoke), which passes
// --sanitize=fuzzer --sanitize=address (coverage and address checks in PeerKit and its
// dependencies too) and -enable-testing (so `@testable import PeerKit` sees the internal types the
// targets drive; the JSON target also `@testable import PeerKitJSON`, the codec's own target inside
// the PeerKit package), with the scratch path .build-fuzz.
import PackageDescription

// Each target defines LLVMFuzzerTestOneInput and no main: libFuzzer provides it.
let fuzzTarget: [SwiftSetting] = [.unsafeFlags(["-parse-as-library"])]

let package = Package(
    name: "PeerKitFuzz",
    dependencies: [
        .package(name: "PeerKit", path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "fuzz-frame-decoder",
            dependencies: [
                .product(name: "PeerKit", package: "PeerKit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            path: "FrameDecoder",
            swiftSettings: fuzzTarget
        ),
        .executableTarget(
            name: "fuzz-connection-state-machine",
            dependencies: [
                .product(name: "PeerKit", package: "PeerKit"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "ConnectionStateMachine",
            swiftSettings: fuzzTarget
        ),
        .executableTarget(
            name: "fuzz-peer-state-machine",
            dependencies: [
                .product(name: "PeerKit", package: "PeerKit"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "PeerStateMachine",
            swiftSettings: fuzzTarget
        ),
        .executableTarget(
            name: "fuzz-json-decoder",
            dependencies: [
                .product(name: "PeerKit", package: "PeerKit"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "JSONDecoder",
            swiftSettings: fuzzTarget
        ),
    ],
    swiftLanguageModes: [.v6]
)
