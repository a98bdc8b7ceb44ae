import ArgumentParser
import ListrKit

extension ListrCtl {
    /// `listrctl item …`: add, list, complete and remove items.
    struct Item: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add, list, complete and remove items.",
            subcommands: [Add.self, List.self, Done.self, Remove.self]
        )
    }
}

extension ListrCtl.Item {
    /// `listrctl item add TITLE`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add an item at the end of the list.")

        @OptionGroup var options: ClientOptions

        @Argument(help: ArgumentHelp("What is to be done; several words are joined with spaces.", valueName: "title"))
        var words: [String]

        func validate() throws {
            guard !words.isEmpty else { throw ValidationError("Give the title of the item to add, for example: listrctl item add Milk") }
        }

        func run() async throws {
            try await options.run { client throws(ListrCtlError) in
                client.print(message: try await client.message(for: AddItemCommand(title: words.joined(separator: " "))))
            }
        }
    }

    /// `listrctl item list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the items in the order they were added.",
            discussion: "With --json, prints {\"items\":[{\"index\":1,\"id\":…,\"title\":…,\"done\":…}]}."
        )

        @OptionGroup var options: ClientOptions

        func run() async throws {
            try await options.run { client throws(ListrCtlError) in
                if client.options.json {
                    // Machine-readable: the structured dump, rather than the human-readable lines.
                    client.print(items: try await client.items())
                } else {
                    client.print(message: try await client.message(for: ListItemsCommand()))
                }
            }
        }
    }

    /// `listrctl item done INDEX`.
    struct Done: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Mark an item as done.")

        @OptionGroup var options: ClientOptions

        @Argument(help: ArgumentHelp("The item's position, from 1, as 'item list' shows it.", valueName: "index"))
        var index: Int

        func run() async throws {
            try await options.run { client throws(ListrCtlError) in
                client.print(message: try await client.message(for: CompleteItemCommand(index: index)))
            }
        }
    }

    /// `listrctl item remove INDEX`.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an item.")

        @OptionGroup var options: ClientOptions

        @Argument(help: ArgumentHelp("The item's position, from 1, as 'item list' shows it.", valueName: "index"))
        var index: Int

        func run() async throws {
            try await options.run { client throws(ListrCtlError) in
                client.print(message: try await client.message(for: RemoveItemCommand(index: index)))
            }
        }
    }
}
