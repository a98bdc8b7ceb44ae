import Testing
@testable import PeerKit

@Suite("Service type and TXT validation")
struct ServiceTypeTests {
    @Test("valid DNS-SD service names are accepted", arguments: ["listrctl", "a", "x1", "my-app", "abcdefghijklmno", "1a", "a-b-c"])
    func valid(name: String) throws {
        try ServiceType.validate(name)
    }

    @Test("invalid service names are refused with the reason", arguments: [
        ("", "it is empty"),
        ("abcdefghijklmnop", "it is 16 characters long, and the limit is 15"),
        ("Listr", "it contains \"L\", and only lowercase letters, digits and '-' are allowed"),
        ("my_app", "it contains \"_\", and only lowercase letters, digits and '-' are allowed"),
        ("_http", "it contains \"_\", and only lowercase letters, digits and '-' are allowed"),
        ("123", "it has no letter"),
        ("-abc", "it starts or ends with '-'"),
        ("abc-", "it starts or ends with '-'"),
        ("a--b", "it contains \"--\""),
    ])
    func invalid(name: String, reason: String) {
        #expect(throws: PeerKitError.invalidServiceType(name, reason: reason)) { try ServiceType.validate(name) }
    }

    @Test("TXT pairs longer than 255 bytes, with an empty key or '=' in the key, are refused")
    func txtPairs() throws {
        try ServiceType.validateTXTPair(key: "role", value: String(repeating: "x", count: 250))
        #expect(throws: PeerKitError.invalidDiscoveryInfo(key: "role", reason: "\"key=value\" is 256 bytes long, and a TXT string holds at most 255")) {
            try ServiceType.validateTXTPair(key: "role", value: String(repeating: "x", count: 251))
        }
        #expect(throws: PeerKitError.invalidDiscoveryInfo(key: "", reason: "the key is empty")) {
            try ServiceType.validateTXTPair(key: "", value: "x")
        }
        #expect(throws: PeerKitError.invalidDiscoveryInfo(key: "a=b", reason: "a key must be printable ASCII without '='")) {
            try ServiceType.validateTXTPair(key: "a=b", value: "x")
        }
    }

    @Test("the error's description is a sentence that says what to do")
    func description() {
        let error = PeerKitError.invalidServiceType("Bad", reason: "it contains \"B\", and only lowercase letters, digits and '-' are allowed")
        #expect(error.description == "The service type \"Bad\" is not a valid DNS-SD service name: it contains \"B\", and only lowercase letters, digits and '-' are allowed. Use 1 to 15 lowercase letters, digits and hyphens, with at least one letter, for example \"listrctl\".")
    }

    @Test("endpoints parse from host:port and [v6]:port")
    func endpoints() {
        #expect(PeerEndpoint("127.0.0.1:7000") == PeerEndpoint(host: "127.0.0.1", port: 7000))
        #expect(PeerEndpoint("[::1]:80") == PeerEndpoint(host: "::1", port: 80))
        #expect(PeerEndpoint("[::1]:80")?.description == "[::1]:80")
        #expect(PeerEndpoint("host") == nil)
        #expect(PeerEndpoint("host:0") == nil)
        #expect(PeerEndpoint(":80") == nil)
        #expect(PeerEndpoint("host:99999") == nil)
    }
}
