import ListrKit
import Testing

@Suite("ItemList rules")
struct ItemListTests {
    @Test("items keep insertion order and get 1-based positions")
    func addsInOrder() throws {
        var list = ItemList()
        #expect(try list.add(title: "Milk").position == 1)
        #expect(try list.add(title: "Bread").position == 2)
        #expect(list.items.map(\.title) == ["Milk", "Bread"])
        #expect(list.items.allSatisfy { !$0.done })
    }

    @Test("the rendering is one [ ] or [✓] line per item")
    func renders() throws {
        var list = ItemList()
        _ = try list.add(title: "Milk")
        _ = try list.add(title: "Bread")
        _ = try list.complete(at: 2)
        #expect(list.rendered == "[ ] Milk\n[✓] Bread")
        #expect(ItemList().rendered == "")
    }

    @Test("complete and remove address items by 1-based position")
    func completesAndRemoves() throws {
        var list = ItemList()
        for title in ["a", "b", "c"] { _ = try list.add(title: title) }
        #expect(try list.complete(at: 3).title == "c")
        #expect(try list.remove(at: 1).title == "a")
        #expect(list.items.map(\.title) == ["b", "c"])
        #expect(list.items.map(\.done) == [false, true])
    }

    @Test("positions outside the list are refused and change nothing", arguments: [0, -1, 3, Int.max])
    func refusesBadPositions(_ position: Int) throws {
        var list = ItemList()
        _ = try list.add(title: "a")
        _ = try list.add(title: "b")
        let before = list
        #expect(throws: ListrError.noSuchItem(position: position, count: 2)) { try list.complete(at: position) }
        #expect(throws: ListrError.noSuchItem(position: position, count: 2)) { try list.remove(at: position) }
        #expect(list == before)
    }

    @Test("blank and multi-line titles are refused", arguments: ["", "   ", "two\nlines", "tab\u{7}bell"])
    func refusesBadTitles(_ title: String) {
        var list = ItemList()
        #expect(throws: ListrError.self) { try list.add(title: title) }
        #expect(list.items.isEmpty)
    }

    @Test("error descriptions are sentences naming the values")
    func errorSentences() {
        let error = ListrError.noSuchItem(position: 4, count: 3)
        #expect(error.description == "There is no item 4: the list has 3 items, numbered from 1. Run \"listrctl item list\" to see the items.")
        #expect(ListrError.notAStore(path: "/tmp/s.json", reason: "it is empty").description.contains("/tmp/s.json"))
    }
}
