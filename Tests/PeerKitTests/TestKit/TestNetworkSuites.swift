import Testing

/// The suites that run transceivers on a `TestNetwork`, grouped so that they can be run on
/// their own: `swift test --filter TestNetworkSuites`. They run in parallel with each other and
/// with every other suite.
@Suite
enum TestNetworkSuites {}
