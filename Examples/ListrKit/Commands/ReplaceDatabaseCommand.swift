import Foundation
import PeerKit

/// Replaces the whole list with the items of a property list in the format `DumpDatabaseCommand` returns. The
/// list is checked first: a malformed one is answered with an error and changes nothing.
///
/// The list travels either in the command (``data``; it must fit in one message) or, for a list
/// of any size, as the resource ``ListrResources/replace`` sent just before, named by ``upload``.
///
/// Wire key `"ReplaceDatabaseCommand"`, payload `{"data":"<base64>"}` or `{"upload":true}`.
public struct ReplaceDatabaseCommand: Codable, Hashable, Sendable, PeerMessage {
    /// `"ReplaceDatabaseCommand"`.
    public static let messageType = "ReplaceDatabaseCommand"

    /// The property list (XML or binary), when it travels in the command.
    public var data: Data?
    /// Use the property list this client uploaded last as the resource ``ListrResources/replace``.
    public var upload: Bool?

    /// Creates the command with the list in it.
    public init(data: Data) {
        self.data = data
        self.upload = nil
    }

    /// Creates the command for the list uploaded just before as a resource.
    public init(upload: Bool) {
        self.data = nil
        self.upload = upload
    }
}
