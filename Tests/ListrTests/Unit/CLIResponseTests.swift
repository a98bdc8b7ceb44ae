import Foundation
import ListrKit
import PeerKit
import Testing

@Suite("CLIResponse wire format")
struct CLIResponseTests {
    private func json(_ response: CLIResponse) throws -> String {
        String(decoding: try JSONEncoder().encode(response), as: UTF8.self)
    }

    private func decode(_ json: String) throws -> CLIResponse {
        try JSONDecoder().decode(CLIResponse.self, from: Data(json.utf8))
    }

    @Test("each case encodes as an object with exactly its one key")
    func encodesOneKey() throws {
        #expect(try json(.message("Added")) == #"{"message":"Added"}"#)
        #expect(try json(.data(Data([0, 1, 2, 255]))) == #"{"data":"AAEC\/w=="}"#)
        #expect(try json(.error("No.")) == #"{"error":"No."}"#)
    }

    @Test("each case decodes from its one-key object", arguments: [
        CLIResponse.message("[ ] Milk\n[✓] Bread"), .data(Data("<plist/>".utf8)), .error("There is no item 4."),
    ])
    func roundTrips(_ response: CLIResponse) throws {
        #expect(try decode(json(response)) == response)
    }

    @Test("an object with no known key or with two keys is refused")
    func refusesAmbiguousObjects() {
        #expect(throws: DecodingError.self) { try decode("{}") }
        #expect(throws: DecodingError.self) { try decode(#"{"status":"ok"}"#) }
        #expect(throws: DecodingError.self) { try decode(#"{"message":"a","error":"b"}"#) }
        #expect(throws: DecodingError.self) { try decode(#"{"data":"not base64!"}"#) }
    }

    @Test("the wire key is CLIResponse")
    func wireKey() {
        #expect(peerMessageType(of: CLIResponse.self) == "CLIResponse")
    }
}
