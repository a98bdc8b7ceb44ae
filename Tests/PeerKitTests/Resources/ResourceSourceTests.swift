import Foundation
import NIOCore
import Testing
@testable import PeerKit

/// What a ``ResourceSource`` of bytes already in memory hands the sender, without I/O.
@Suite("Resource sources of bytes in memory")
struct ResourceSourceTests {
    /// The size a source announces and the chunks it produces, at `chunkLength`.
    private func produced(_ source: ResourceSource, chunkLength: Int) async throws -> (size: Int64?, chunks: [[UInt8]]) {
        var chunks: [[UInt8]] = []
        try await source.produce(chunkLength) { chunks.append(Array($0.readableBytesView)) }
        return (try await source.size(), chunks)
    }

    private let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    @Test("Data, [UInt8], a ByteBuffer and a plain sequence give the same chunks", arguments: [1, 64, 999, 1000, 4096])
    func sameChunks(chunkLength: Int) async throws {
        let expected = stride(from: 0, to: bytes.count, by: chunkLength).map { Array(bytes[$0..<min($0 + chunkLength, bytes.count)]) }
        for source in [ResourceSource.bytes(Data(bytes)), .bytes(bytes), .bytes(ByteBuffer(bytes: bytes)), .bytes(bytes.lazy.map { $0 })] {
            let (size, chunks) = try await produced(source, chunkLength: chunkLength)
            #expect(size == Int64(bytes.count))
            #expect(chunks == expected)
        }
    }

    @Test("a slice of Data (whose indices do not start at 0) is sent from its own first byte")
    func dataSlice() async throws {
        let data = Data(bytes)[100..<300]
        let (size, chunks) = try await produced(.bytes(data), chunkLength: 64)
        #expect(size == 200)
        #expect(Array(chunks.joined()) == Array(bytes[100..<300]))
    }

    @Test("empty bytes produce no chunk and announce 0 bytes")
    func empty() async throws {
        for source in [ResourceSource.bytes(Data()), .bytes([UInt8]()), .bytes(ByteBuffer())] {
            let (size, chunks) = try await produced(source, chunkLength: 64)
            #expect(size == 0)
            #expect(chunks.isEmpty)
        }
    }
}
