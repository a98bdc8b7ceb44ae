/// What the wire layer can find wrong with the bytes a peer sent.
///
/// The connection layer turns these into ``PeerKitError`` values that name the peer.
enum WireError: Error, Hashable, Sendable {
    /// A length field above the receiver's limit.
    case frameTooLarge(length: Int, limit: Int)
    /// The stream ended in the middle of a frame.
    case truncatedFrame(bytesLeft: Int)
    /// A frame whose body is not a valid envelope.
    case malformedEnvelope(String)

    /// A sentence fragment for error messages.
    var reason: String {
        switch self {
        case let .frameTooLarge(length, limit):
            return "a frame of \(length) bytes exceeds the \(limit)-byte limit"
        case let .truncatedFrame(bytesLeft):
            return "the connection closed in the middle of a frame (\(bytesLeft) bytes left over)"
        case let .malformedEnvelope(reason):
            return reason
        }
    }
}
