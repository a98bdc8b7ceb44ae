import Foundation
import NIOCore
import NIOFileSystem

/// Where the bytes of an outgoing resource come from: a file, or an `AsyncSequence` of chunks.
///
/// ```swift
/// let transfer = try await transceiver.send(resource: .file(URL(filePath: "/var/backups/store.sqlite")),
///                                           named: "store", to: peer)
/// ```
///
/// The bytes are read as they are sent, a chunk at a time, so a resource of any size costs the
/// sender about one chunk of memory.
public struct ResourceSource: Sendable {
    /// The size in bytes, when known before sending (it is then announced to the receiver, who
    /// can refuse a resource over its limit before any byte travels).
    let size: @Sendable () async throws -> Int64?
    /// Calls `consume` with each piece of the resource, in order; `chunkLength` is a hint.
    let produce: @Sendable (_ chunkLength: Int, _ consume: (ByteBuffer) async throws -> Void) async throws -> Void

    /// The file at `url`, read in chunks as it is sent (with NIO's file system, off the event loops).
    public static func file(_ url: URL) -> ResourceSource {
        let path = FilePath(url.path)
        return ResourceSource(
            size: {
                guard let info = try await FileSystem.shared.info(forFileAt: path) else {
                    throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: url.path])
                }
                return info.size
            },
            produce: { chunkLength, consume in
                try await FileSystem.shared.withFileHandle(forReadingAt: path) { handle in
                    for try await chunk in handle.readChunks(chunkLength: .bytes(Int64(chunkLength))) {
                        try await consume(chunk)
                    }
                }
            }
        )
    }

    /// The chunks of `sequence`, in order, of any lengths (long ones are split). Give `size` when
    /// you know it: the receiver then sees a total in its progress and can refuse early. A
    /// sequence that yields more or fewer bytes than `size` fails the transfer.
    public static func chunks<S: AsyncSequence & Sendable>(_ sequence: S, size: Int64? = nil) -> ResourceSource where S.Element == ByteBuffer {
        ResourceSource(size: { size }, produce: { _, consume in
            for try await chunk in sequence { try await consume(chunk) }
        })
    }

    /// The chunks of `sequence`, as byte arrays; see ``chunks(_:size:)-(S,_)``.
    public static func chunks<S: AsyncSequence & Sendable>(_ sequence: S, size: Int64? = nil) -> ResourceSource where S.Element == [UInt8] {
        ResourceSource(size: { size }, produce: { _, consume in
            for try await chunk in sequence { try await consume(ByteBuffer(bytes: chunk)) }
        })
    }

    /// `bytes`, already in memory and indexable (`Data`, `[UInt8]`, ...): each chunk is copied
    /// out of it as it is sent, so sending holds no second copy of the whole.
    public static func bytes<C: RandomAccessCollection<UInt8> & Sendable>(_ bytes: C) -> ResourceSource {
        ResourceSource(size: { Int64(bytes.count) }, produce: { chunkLength, consume in
            var start = bytes.startIndex
            while start != bytes.endIndex {
                let end = bytes.index(start, offsetBy: chunkLength, limitedBy: bytes.endIndex) ?? bytes.endIndex
                let slice = bytes[start..<end]
                try await consume(slice.withContiguousStorageIfAvailable { ByteBuffer(bytes: $0) } ?? ByteBuffer(bytes: slice))
                start = end
            }
        })
    }

    /// `buffer`, sent in slices of it (no copy).
    public static func bytes(_ buffer: ByteBuffer) -> ResourceSource {
        ResourceSource(size: { Int64(buffer.readableBytes) }, produce: { chunkLength, consume in
            var rest = buffer
            while rest.readableBytes > 0, let piece = rest.readSlice(length: min(chunkLength, rest.readableBytes)) {
                try await consume(piece)
            }
        })
    }

    /// `bytes`, any other sequence already in memory: copied once into a buffer, then sent in
    /// slices of it.
    public static func bytes(_ bytes: some Sequence<UInt8> & Sendable) -> ResourceSource {
        let buffer = ByteBuffer(bytes: bytes)
        return ResourceSource(size: { Int64(buffer.readableBytes) }, produce: { chunkLength, consume in
            var rest = buffer
            while rest.readableBytes > 0, let piece = rest.readSlice(length: min(chunkLength, rest.readableBytes)) {
                try await consume(piece)
            }
        })
    }
}
