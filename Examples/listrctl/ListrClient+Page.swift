import ListrKit
import ToolSupport

extension ListrClient {
    /// A page of items, as the structured answer to ``ListItemsCommand``. listrd may answer fewer
    /// items than `limit` asks for: a page stops at ``ListrLimits/maximumAnswerBytes``.
    func page(limit: Int?, offset: Int?) async throws(ListrCtlError) -> [ListrKit.Item] {
        let data = try await data(for: ListItemsCommand(limit: limit, offset: offset, structured: true))
        do {
            return try ItemPropertyList.decode(data)
        } catch {
            throw .unexpectedAnswer("a page of the list that does not decode (\(error))")
        }
    }

    /// Up to `limit` items (all when nil) from the 0-based `offset` on, asked for page after page
    /// until there are `limit` of them or a page comes back empty, so that a list larger than one
    /// answer is listed whole.
    func items(limit: Int?, offset: Int?) async throws(ListrCtlError) -> [ListrKit.Item] {
        var items: [ListrKit.Item] = []
        var next = offset ?? 0
        while true {
            let wanted = limit.map { $0 - items.count }
            if let wanted, wanted < 1 { break }
            let page = try await page(limit: wanted, offset: next)
            if page.isEmpty { break }
            items += page
            next += page.count
        }
        return items
    }

    /// The page `limit` and `offset` select as `[ ] title` lines (titles escaped for the
    /// terminal), or listrd's sentence when there is no item there ("The list is empty.").
    func renderedItems(limit: Int?, offset: Int?) async throws(ListrCtlError) -> String {
        let items = try await items(limit: limit, offset: offset)
        if items.isEmpty {
            return TerminalSafe.lines(try await message(for: ListItemsCommand(limit: limit, offset: offset)))
        }
        return TerminalSafe.rendered(items)
    }
}
