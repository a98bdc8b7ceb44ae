import Foundation
import ListrKit
import PeerKit
import Testing

@Suite("Listr command wire format")
struct CommandWireFormatTests {
    private func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    @Test("wire keys are the type names")
    func wireKeys() {
        #expect(peerMessageType(of: AddItemCommand.self) == "AddItemCommand")
        #expect(peerMessageType(of: ListItemsCommand.self) == "ListItemsCommand")
        #expect(peerMessageType(of: DumpDatabaseCommand.self) == "DumpDatabaseCommand")
        #expect(peerMessageType(of: ReplaceDatabaseCommand.self) == "ReplaceDatabaseCommand")
        #expect(peerMessageType(of: CompleteItemCommand.self) == "CompleteItemCommand")
        #expect(peerMessageType(of: RemoveItemCommand.self) == "RemoveItemCommand")
    }

    @Test("payloads are the documented JSON objects")
    func payloads() throws {
        #expect(try json(AddItemCommand(title: "Milk")) == #"{"title":"Milk"}"#)
        #expect(try json(ListItemsCommand()) == "{}")
        #expect(try json(DumpDatabaseCommand()) == "{}")
        #expect(try json(ReplaceDatabaseCommand(data: Data("hi".utf8))) == #"{"data":"aGk="}"#)
        #expect(try json(CompleteItemCommand(index: 2)) == #"{"index":2}"#)
        #expect(try json(RemoveItemCommand(index: 2)) == #"{"index":2}"#)
    }

    @Test("payloads from another implementation decode")
    func decodesForeignPayloads() throws {
        let decoder = JSONDecoder()
        #expect(try decoder.decode(AddItemCommand.self, from: Data(#"{"title":"Milk"}"#.utf8)) == AddItemCommand(title: "Milk"))
        #expect(try decoder.decode(ListItemsCommand.self, from: Data("{}".utf8)) == ListItemsCommand())
        #expect(try decoder.decode(RemoveItemCommand.self, from: Data(#"{"index":3}"#.utf8)) == RemoveItemCommand(index: 3))
    }
}
