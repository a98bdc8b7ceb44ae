// Codes about resource transfers (files and byte sequences sent in chunks).
// To add a code, see "Adding a code" in PeerKitError.swift.

extension PeerKitError.Code {
    /// The source of an outgoing resource failed (a file that cannot be read, a sequence that threw, or fewer or more bytes than its declared size).
    public static let resourceSourceFailed = Self("resourceSourceFailed")
    /// A received resource's SHA-256 digest differs from the one its sender computed; the bytes were discarded.
    public static let resourceDigestMismatch = Self("resourceDigestMismatch")
    /// A resource transfer was cancelled: by this side (``OutgoingResource/cancel()``, ``IncomingResource/cancel()``) or by the sender.
    public static let resourceCancelled = Self("resourceCancelled")
    /// The receiver of a resource refused it (no handler for its name, one of its limits) or cancelled it while receiving it.
    public static let resourceRefused = Self("resourceRefused")
}

extension PeerKitError {
    /// The source of an outgoing resource failed (a file that cannot be read, a sequence that threw, or fewer or more bytes than its declared size).
    public static func resourceSourceFailed(name: String, reason: String) -> PeerKitError {
        PeerKitError(.resourceSourceFailed, ["name": .text(name), "reason": .text(reason)],
                     "The resource \"\(name)\" could not be read: \(reason); its transfer was cancelled.")
    }

    /// A received resource's SHA-256 digest differs from the one its sender computed; the bytes were discarded.
    public static func resourceDigestMismatch(name: String, peer: String) -> PeerKitError {
        PeerKitError(.resourceDigestMismatch, ["name": .text(name), "peer": .text(peer)],
                     "The resource \"\(name)\" from \(peer) arrived corrupted: its SHA-256 digest differs from the one the sender computed, so its bytes were discarded and no file was written under its name. Send it again.")
    }

    /// A resource transfer was cancelled: by this side (``OutgoingResource/cancel()``, ``IncomingResource/cancel()``) or by the sender.
    public static func resourceCancelled(name: String, peer: String, reason: String) -> PeerKitError {
        PeerKitError(.resourceCancelled, ["name": .text(name), "peer": .text(peer), "reason": .text(reason)],
                     "The transfer of the resource \"\(name)\" with \(peer) was cancelled: \(reason.asClause).")
    }

    /// The receiver of a resource refused it (no handler for its name, one of its limits) or cancelled it while receiving it.
    public static func resourceRefused(name: String, peer: String, reason: String) -> PeerKitError {
        PeerKitError(.resourceRefused, ["name": .text(name), "peer": .text(peer), "reason": .text(reason)],
                     "\(peer.capitalizedFirst) refused the resource \"\(name)\": \(reason.asClause).")
    }
}

extension String {
    /// The text without its final period, so that it ends a sentence of ours once: a reason may
    /// be a sentence of its own (a handler's error, a peer's words).
    var asClause: Substring { hasSuffix(".") ? dropLast() : self[...] }
}
