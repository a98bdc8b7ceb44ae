import ArgumentParser
import Foundation
import ListrKit

extension ListrCtl {
    /// `listrctl store …`: dump and replace the whole list.
    struct Store: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Dump the whole list to a property list, or replace it with one.",
            subcommands: [Dump.self, Replace.self]
        )
    }
}

extension ListrCtl.Store {
    /// `listrctl store dump PATH`.
    struct Dump: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the whole list to a file as an XML property list.",
            discussion: "The file is an array of dicts with the keys id, title and done; '-' writes to standard output."
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: ArgumentHelp("The file to write, or '-'.", valueName: "path"))
        var path: String

        func run() async throws {
            try await options.run { client throws(ListrCtlError) in
                let data = try await client.data(for: DumpDatabaseCommand())
                if path == "-" {
                    FileHandle.standardOutput.write(data)
                    return
                }
                do {
                    try data.write(to: URL(fileURLWithPath: path), options: .atomic)
                } catch {
                    throw .cannotWrite(path: path, reason: ListrError.reason(forFileError: error))
                }
                client.print(message: "Wrote the list (\(data.count) bytes) to \(path).")
            }
        }
    }

    /// `listrctl store replace PATH`.
    struct Replace: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace the whole list with the items of a property list.",
            discussion: """
            The file must be in the format 'store dump' writes (XML or binary); '-' reads standard input. \
            listrd checks it first: a malformed one is refused and the list stays as it was.
            """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: ArgumentHelp("The property list to read, or '-'.", valueName: "path"))
        var path: String

        func run() async throws {
            // Read first: a file that cannot be read needs no daemon.
            let data: Data
            do {
                data = path == "-"
                    ? FileHandle.standardInput.readDataToEndOfFile()
                    : try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw options.fail(.cannotRead(path: path, reason: ListrError.reason(forFileError: error)))
            }
            try await options.run { client throws(ListrCtlError) in
                client.print(message: try await client.message(for: ReplaceDatabaseCommand(data: data)))
            }
        }
    }
}
