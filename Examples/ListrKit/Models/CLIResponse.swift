import Foundation
import PeerKit

/// The daemon's answer to every command: a message to show, data to save, or an error.
///
/// On the wire it is an object with exactly one key:
///
/// ```json
/// {"message":"Added \"Milk\" as item 1."}
/// {"data":"PD94bWwg…"}
/// {"error":"There is no item 4; the list has 3 items."}
/// ```
public enum CLIResponse: Hashable, Sendable {
    /// Text for the user (for `item list`, one line per item).
    case message(String)
    /// Data: the XML property list of `store dump`, of a `watch`'s starting list or of a structured
    /// `item list` page, or the settings as JSON.
    case data(Data)
    /// The command was refused; the text is a sentence saying why and what to do.
    case error(String)
}

extension CLIResponse: Codable {
    private enum CodingKeys: String, CodingKey, CaseIterable {
        case message, data, error
    }

    /// Decodes an object with exactly one of the keys `message`, `data` and `error`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let present = CodingKeys.allCases.filter(container.contains)
        guard present.count == 1, let key = present.first else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "A CLIResponse has exactly one of the keys \"message\", \"data\" and \"error\", and this one has \(present.isEmpty ? "none" : present.map { "\"\($0.rawValue)\"" }.joined(separator: " and "))."
            ))
        }
        switch key {
        case .message: self = .message(try container.decode(String.self, forKey: .message))
        case .data: self = .data(try container.decode(Data.self, forKey: .data))
        case .error: self = .error(try container.decode(String.self, forKey: .error))
        }
    }

    /// Encodes an object with the one key of the case.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case let .message(text): try container.encode(text, forKey: .message)
        case let .data(data): try container.encode(data, forKey: .data)
        case let .error(text): try container.encode(text, forKey: .error)
        }
    }
}

extension CLIResponse: PeerMessage {
    /// `"CLIResponse"`, pinned so that renaming the Swift type cannot change the protocol.
    public static let messageType = "CLIResponse"
}
