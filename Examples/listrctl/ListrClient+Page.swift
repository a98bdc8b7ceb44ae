import ListrKit

extension ListrClient {
    /// A page of items, as the structured answer to ``ListItemsCommand``.
    func page(limit: Int?, offset: Int?) async throws(ListrCtlError) -> [ListrKit.Item] {
        let data = try await data(for: ListItemsCommand(limit: limit, offset: offset, structured: true))
        do {
            return try ItemPropertyList.decode(data)
        } catch {
            throw .unexpectedAnswer("a page of the list that does not decode (\(error))")
        }
    }
}
