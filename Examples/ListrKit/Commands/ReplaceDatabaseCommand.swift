import Foundation
import PeerKit

/// Replaces the whole list with the items of a property list in the format `DumpDatabaseCommand` returns. The
/// list is checked first: a malformed one is answered with an error and changes nothing.
///
/// Wire key `"ReplaceDatabaseCommand"`, payload `{"data":"<base64>"}`.
public struct ReplaceDatabaseCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"ReplaceDatabaseCommand"`.
    public static let messageType = "ReplaceDatabaseCommand"

    /// The property list (XML or binary).
    public var data: Data

    /// Creates the command.
    public init(data: Data) {
        self.data = data
    }
}
