import ArgumentParser
import Foundation
import ListrKit
import NIOCore
import PeerKit
import Synchronization

extension ListrCtl {
    /// `listrctl store …`: dump and replace the whole list.
    struct Store: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "store",
            abstract: "Dump the whole list to a property list, or replace it with one.",
            subcommands: [Dump.self, Replace.self]
        )
    }
}

extension ListrCtl.Store {
    /// `listrctl store dump PATH`.
    struct Dump: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dump",
            abstract: "Write the whole list to a file as an XML property list.",
            discussion: "The file is an array of dicts with the keys id, title and done; '-' writes to standard output."
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: ArgumentHelp("The file to write, or '-'.", valueName: "path"))
        var path: String

        func run() async throws {
            let path = path
            let bar = ProgressBar(json: options.json)
            let timeout = options.timeoutDuration
            try await options.run { client throws(ListrCtlError) in
                // The list arrives as a resource, in chunks, written to a temporary file that takes
                // the name only once complete and intact.
                let (events, continuation) = AsyncStream.makeStream(of: DumpEvent.self)
                let daemonID = client.daemon.id
                client.transceiver.receiveResources(named: ListrResources.dump) { resource in
                    guard resource.sender.id == daemonID else {
                        throw ListrCtlError.unexpectedAnswer("a dump from another peer")
                    }
                    continuation.yield(.started)
                    let drawing = bar.follow(resource.progress, label: "Receiving")
                    do {
                        let count = try await Self.store(resource, at: path)
                        await drawing.value
                        continuation.yield(.finished(.success(count)))
                    } catch {
                        await drawing.value
                        continuation.yield(.finished(.failure(Self.failure(error, path: path))))
                        throw error
                    }
                }
                switch try await client.response(for: DumpDatabaseCommand(asResource: true)) {
                case .message:
                    break
                case let .data(data):
                    // A listrd from before resources answers with the whole list.
                    let count = try Self.store(data, at: path)
                    if path != "-" { client.print(message: "Wrote the list (\(count) bytes) to \(path).") }
                    return
                case let .error(reason):
                    throw .refused(reason)
                }
                let count = try await Self.outcome(of: events, startingWithin: timeout)
                if path != "-" { client.print(message: "Wrote the list (\(count) bytes) to \(path).") }
            }
        }

        private enum DumpEvent: Sendable {
            case started
            case finished(Result<Int64, ListrCtlError>)
        }

        /// Waits for the dump to start (within `timeout`) and then to finish (however long it takes:
        /// a stalled or lost daemon fails the transfer).
        private static func outcome(of events: AsyncStream<DumpEvent>, startingWithin timeout: Duration) async throws(ListrCtlError) -> Int64 {
            final class Started: Sendable { let value = Atomic<Bool>(false) }
            let started = Started()
            let result = await withTaskGroup(of: Result<Int64, ListrCtlError>?.self) { group in
                group.addTask {
                    for await event in events {
                        switch event {
                        case .started: started.value.store(true, ordering: .relaxed)
                        case let .finished(result): return result
                        }
                    }
                    return .failure(.cancelled)
                }
                group.addTask {
                    try? await Task.sleep(for: timeout)
                    if started.value.load(ordering: .relaxed) || Task.isCancelled { return nil }
                    return .failure(.unexpectedAnswer("no dump within \(timeout) of listrd's answer"))
                }
                var outcome: Result<Int64, ListrCtlError> = .failure(.cancelled)
                while let next = await group.next() {
                    if let next {
                        outcome = next
                        break
                    }
                }
                group.cancelAll()
                return outcome
            }
            return try result.get()
        }

        /// Writes the resource to `path` (or standard output for '-'); returns its size.
        private static func store(_ resource: IncomingResource, at path: String) async throws -> Int64 {
            if path == "-" {
                var count: Int64 = 0
                for try await chunk in resource.chunks {
                    FileHandle.standardOutput.write(Data(chunk.readableBytesView))
                    count += Int64(chunk.readableBytes)
                }
                return count
            }
            try await resource.write(to: URL(fileURLWithPath: path))
            return resource.size ?? 0
        }

        /// Writes `data` to `path` (or standard output for '-'); returns its size.
        private static func store(_ data: Data, at path: String) throws(ListrCtlError) -> Int64 {
            if path == "-" {
                FileHandle.standardOutput.write(data)
                return Int64(data.count)
            }
            do {
                try data.write(to: URL(fileURLWithPath: path), options: .atomic)
            } catch {
                throw .cannotWrite(path: path, reason: ListrError.reason(forFileError: error))
            }
            return Int64(data.count)
        }

        private static func failure(_ error: any Error, path: String) -> ListrCtlError {
            switch error {
            case let error as PeerKitError: return .peerKit(error)
            case let error as ListrCtlError: return error
            default: return .cannotWrite(path: path, reason: ListrError.reason(forFileError: error))
            }
        }
    }

    /// `listrctl store replace PATH`.
    struct Replace: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "replace",
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
            // Check first: a file that cannot be read needs no daemon. Standard input is read
            // into memory (its size is not known in advance); a file is sent as it is read.
            let source: ResourceSource
            let stdinData: Data?
            do {
                if path == "-" {
                    let data = FileHandle.standardInput.readDataToEndOfFile()
                    stdinData = data
                    source = .bytes(data)
                } else {
                    let url = URL(fileURLWithPath: path)
                    try FileHandle(forReadingFrom: url).close()
                    stdinData = nil
                    source = .file(url)
                }
            } catch {
                throw options.fail(.cannotRead(path: path, reason: ListrError.reason(forFileError: error)))
            }
            let path = path
            let bar = ProgressBar(json: options.json)
            try await options.run { client throws(ListrCtlError) in
                let transfer: OutgoingResource
                do {
                    transfer = try await client.transceiver.send(resource: source, named: ListrResources.replace, to: client.daemon)
                } catch let error as PeerKitError where error.code == .featureNotSupported {
                    // A listrd from before resources: the list goes in the command.
                    let data: Data
                    if let stdinData { data = stdinData } else { data = try Self.read(path) }
                    client.print(message: try await client.message(for: ReplaceDatabaseCommand(data: data)))
                    return
                } catch {
                    throw ListrCtlError(error)
                }
                let drawing = bar.follow(transfer.progress, label: "Sending")
                do {
                    try await transfer.finished()
                } catch {
                    await drawing.value
                    throw ListrCtlError(error)
                }
                await drawing.value
                client.print(message: try await client.message(for: ReplaceDatabaseCommand(upload: true)))
            }
        }

        private static func read(_ path: String) throws(ListrCtlError) -> Data {
            do {
                return try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw .cannotRead(path: path, reason: ListrError.reason(forFileError: error))
            }
        }
    }
}
