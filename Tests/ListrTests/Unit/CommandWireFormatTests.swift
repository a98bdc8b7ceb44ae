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
        #expect(peerMessageType(of: WatchCommand.self) == "WatchCommand")
        #expect(peerMessageType(of: GetSettingsCommand.self) == "GetSettingsCommand")
        #expect(peerMessageType(of: SetSettingCommand.self) == "SetSettingCommand")
        #expect(peerMessageType(of: ResetSettingsCommand.self) == "ResetSettingsCommand")
        #expect(peerMessageType(of: ListrChange.self) == "ListrChangeEvent")
        #expect(peerMessageType(of: WatchEndedEvent.self) == "WatchEndedEvent")
    }

    @Test("payloads are the documented JSON objects")
    func payloads() throws {
        #expect(try json(AddItemCommand(title: "Milk")) == #"{"title":"Milk"}"#)
        #expect(try json(ListItemsCommand()) == "{}")
        #expect(try json(DumpDatabaseCommand()) == "{}")
        #expect(try json(ReplaceDatabaseCommand(data: Data("hi".utf8))) == #"{"data":"aGk="}"#)
        #expect(try json(CompleteItemCommand(index: 2)) == #"{"index":2}"#)
        #expect(try json(RemoveItemCommand(index: 2)) == #"{"index":2}"#)
        #expect(try json(ListItemsCommand(limit: 20, offset: 40, structured: true)) == #"{"limit":20,"offset":40,"structured":true}"#)
        #expect(try json(WatchCommand()) == "{}")
        #expect(try json(GetSettingsCommand()) == "{}")
        #expect(try json(SetSettingCommand(key: "item-limit", value: "500")) == #"{"key":"item-limit","value":"500"}"#)
        #expect(try json(ResetSettingsCommand()) == "{}")
        #expect(try json(WatchEndedEvent(reason: "slow")) == #"{"reason":"slow"}"#)
        let item = Item(id: UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!, title: "Milk")
        #expect(try json(ListrChange(kind: .added, client: "listrctl 1 on vm", index: 3, item: item))
            == #"{"client":"listrctl 1 on vm","index":3,"item":{"done":false,"id":"6F9619FF-8B86-D011-B42D-00C04FC964FF","title":"Milk"},"kind":"added"}"#)
    }

    @Test("payloads from another implementation decode")
    func decodesForeignPayloads() throws {
        let decoder = JSONDecoder()
        #expect(try decoder.decode(AddItemCommand.self, from: Data(#"{"title":"Milk"}"#.utf8)) == AddItemCommand(title: "Milk"))
        #expect(try decoder.decode(ListItemsCommand.self, from: Data("{}".utf8)) == ListItemsCommand())
        #expect(try decoder.decode(RemoveItemCommand.self, from: Data(#"{"index":3}"#.utf8)) == RemoveItemCommand(index: 3))
    }
}
