import Testing

/// The discovery tests, grouped so that `swift test --filter Discovery` runs them all.
@Suite("Discovery") enum DiscoveryTests {}
