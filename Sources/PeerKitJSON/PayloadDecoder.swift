import NIOCore

/// Decodes `Decodable` values straight from payload JSON bytes, without building a tree.
///
/// Foundation's `JSONDecoder` parses the whole document into its own representation first; for the
/// small payloads that dominate peer messaging that costs more than the decoding itself. This
/// decoder checks the payload's syntax once with ``JSONReader`` and then reads values where they
/// lie: a keyed container indexes its object's member names once (as byte ranges, no strings
/// made), and each value is parsed when asked for. It follows `JSONDecoder`'s defaults: `Data` as
/// Base64, `Date` as seconds since 2001 (`deferredToDate`), `URL` as a string, `Decimal` as a
/// number, the first of repeated keys; unlike `JSONDecoder` it refuses trailing commas (RFC 8259).
package enum PayloadDecoder {
    /// Decodes a `T` from `payload`.
    ///
    /// - Parameter syntaxChecked: true when `payload` is exactly one JSON value whose syntax was
    ///   already checked (as ``EnvelopeParser`` checks every payload), so it is not walked again.
    /// - Parameter longStringEnds: where the payload's long strings end (offsets into `payload`'s
    ///   readable bytes), as the envelope scan found them (``Envelope/payloadStringEnds``).
    package static func decode<T: Decodable>(_ type: T.Type, from payload: ByteBuffer, syntaxChecked: Bool = false, longStringEnds: [Int: Int] = [:]) throws -> T {
        var work = 0
        return try decode(T.self, from: payload, syntaxChecked: syntaxChecked, longStringEnds: longStringEnds, work: &work)
    }

    /// Decodes a `T` and reports the elementary steps it took (see ``JSONDocument/work``), so
    /// tests can check that decoding stays linear in the payload's size.
    static func decodeCountingWork<T: Decodable>(_ type: T.Type, from payload: ByteBuffer, syntaxChecked: Bool = false, longStringEnds: [Int: Int] = [:]) throws -> (value: T, work: Int) {
        var work = 0
        let value = try decode(T.self, from: payload, syntaxChecked: syntaxChecked, longStringEnds: longStringEnds, work: &work)
        return (value, work)
    }

    /// Decodes a `T`, setting `work` to the elementary steps it took. The count is passed out
    /// rather than returned with the value: a `(T, Int)` result of the generic closure below made
    /// the runtime look up the tuple's metadata on every decode.
    private static func decode<T: Decodable>(_ type: T.Type, from payload: ByteBuffer, syntaxChecked: Bool, longStringEnds: [Int: Int], work: inout Int) throws -> T {
        try withDocument(payload, syntaxChecked: syntaxChecked, longStringEnds: longStringEnds) { document, start in
            let value = try JSONValue(document: document, offset: start).decodeValue(T.self)
            work = document.work
            return value
        }
    }

    /// Calls `body` with the document of `payload`, its syntax checked unless `syntaxChecked`,
    /// and where its value starts. The document reads the payload's bytes in place, so it is
    /// valid only inside `body`.
    static func withDocument<R>(_ payload: ByteBuffer, syntaxChecked: Bool, longStringEnds: [Int: Int], _ body: (JSONDocument, Int) throws -> R) throws -> R {
        try unsafe payload.withUnsafeReadableBytes { bytes in
            let reader = unsafe JSONReader(bytes: bytes)
            let start = reader.skipWhitespace(from: 0)
            if !syntaxChecked {
                try checkSyntax(reader, from: start)
            }
            return try body(JSONDocument(reader: reader, longStringEnds: syntaxChecked ? longStringEnds : [:]), start)
        }
    }

    /// Throws `DecodingError.dataCorrupted` unless the bytes from `start` are one JSON value.
    private static func checkSyntax(_ reader: JSONReader, from start: Int) throws {
        do throws(JSONSyntaxError) {
            let end = try reader.skipValue(at: start)
            guard unsafe reader.skipWhitespace(from: end) == reader.bytes.count else {
                throw JSONSyntaxError(reason: "there are bytes after the payload's JSON value")
            }
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: error.reason))
        }
    }
}
