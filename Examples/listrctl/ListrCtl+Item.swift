import ArgumentParser
import ListrKit

extension ListrCtl {
    /// `listrctl item …`: add, list, complete and remove items.
    struct Item: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "item",
            abstract: "Add, list, complete and remove items.",
            subcommands: [Add.self, List.self, Done.self, Remove.self]
        )
    }
}

extension ListrCtl.Item {
    /// `listrctl item add TITLE`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Add an item at the end of the list.")

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
            commandName: "list",
            abstract: "List the items in the order they were added.",
            discussion: """
            With --json, prints {"items":[{"index":1,"id":…,"title":…,"done":…}]}. --limit and --offset select a page. \
            With --watch, keeps the list on screen, redrawn after every change, until Ctrl-C.
            """
        )

        @OptionGroup var options: ClientOptions

        @Option(help: ArgumentHelp("Show at most this many items.", valueName: "count"))
        var limit: Int?

        @Option(help: ArgumentHelp("Skip this many items first.", valueName: "count"))
        var offset: Int?

        @Flag(help: "Keep the list on screen, redrawn after every change, until Ctrl-C.")
        var watch = false

        func validate() throws {
            if let limit, limit < 1 { throw ValidationError("The limit \(limit) is less than 1: give --limit 1 or more.") }
            if let offset, offset < 0 { throw ValidationError("The offset \(offset) is negative: give --offset 0 or more.") }
        }

        func run() async throws {
            if watch {
                let interrupt = Interrupt.exitOnSIGINT()
                defer { withExtendedLifetime(interrupt) {} }
                do throws(ListrCtlError) {
                    try await ListrWatchSession(options: options).run(ListWatchView(limit: limit, offset: offset, json: options.json))
                } catch {
                    throw options.fail(error)
                }
            }
            try await options.run { client throws(ListrCtlError) in
                if client.options.json {
                    // Machine-readable: the structured page, rather than the human-readable lines.
                    client.print(items: try await client.items(limit: limit, offset: offset), from: offset ?? 0)
                } else {
                    // Rendered here, page after page, so that a list larger than one answer is
                    // listed whole and every title is escaped for the terminal.
                    client.print(message: try await client.renderedItems(limit: limit, offset: offset))
                }
            }
        }
    }

    /// `listrctl item done INDEX`.
    struct Done: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "done", abstract: "Mark an item as done.")

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
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an item.")

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
