import PeerKit

/// listrd's settings, as one value: kept in the store's database, shown by `listrctl config get`,
/// changed by `config set KEY VALUE` and `config reset`, and applied at once.
///
/// On the wire and in the database it is a JSON object:
///
/// ```json
/// {"itemLimit":1000000,"logLevel":"info","name":"Listr on vm"}
/// ```
///
/// A key missing from a stored object takes its default, so a setting added later does not make
/// an older database unreadable.
public struct ListrSettings: Codable, Hashable, Sendable {
    /// The lowest level listrd logs.
    public var logLevel: LogLevel
    /// The name listrd advertises, which `listrctl --peer` selects.
    public var name: String
    /// The most items the list may hold; an add or a replace beyond it is refused.
    public var itemLimit: Int

    /// A log level, spelled as swift-log spells its levels.
    public enum LogLevel: String, Codable, CaseIterable, Sendable {
        case trace, debug, info, notice, warning, error, critical
    }

    /// The keys `listrctl config set` takes.
    public enum Key: String, CaseIterable, Sendable {
        case logLevel = "log-level"
        case name
        case itemLimit = "item-limit"
    }

    /// The largest `item-limit` accepted: 10,000,000 items (about 1.5 GB of database with
    /// 100-byte titles). A limit exists so that one client cannot fill the disk by accident.
    public static let maximumItemLimit = 10_000_000

    /// The longest name: 63 bytes of UTF-8, the longest DNS-SD instance name.
    public static let maximumNameLength = 63

    /// `"Listr on <host name>"`.
    public static var defaultName: String {
        String(decoding: "Listr on \(PeerConfiguration.defaultPeerName)".utf8.prefix(maximumNameLength), as: UTF8.self)
    }

    /// The defaults: level `info`, name `Listr on <host name>`, at most 1,000,000 items.
    public static var defaults: ListrSettings {
        ListrSettings(logLevel: .info, name: defaultName, itemLimit: 1_000_000)
    }

    /// Creates settings.
    public init(logLevel: LogLevel, name: String, itemLimit: Int) {
        self.logLevel = logLevel
        self.name = name
        self.itemLimit = itemLimit
    }

    private enum CodingKeys: String, CodingKey {
        case logLevel, name, itemLimit
    }

    /// Decodes settings; a missing key takes its default, and every value is checked.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self.defaults
        logLevel = try container.decodeIfPresent(LogLevel.self, forKey: .logLevel) ?? defaults.logLevel
        name = try container.decodeIfPresent(String.self, forKey: .name) ?? defaults.name
        itemLimit = try container.decodeIfPresent(Int.self, forKey: .itemLimit) ?? defaults.itemLimit
        do {
            try Self.validate(name: name)
            try Self.validate(itemLimit: itemLimit)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    /// The value of `key`, as `config get` prints it.
    public func value(of key: Key) -> String {
        switch key {
        case .logLevel: logLevel.rawValue
        case .name: name
        case .itemLimit: String(itemLimit)
        }
    }

    /// One `key: value` line per setting, in the order of ``Key``.
    public var rendered: String {
        Key.allCases.map { "\($0.rawValue): \(value(of: $0))" }.joined(separator: "\n")
    }

    /// Sets the setting named `key` from its text; throws ``ListrError/unknownSetting(_:)`` or
    /// ``ListrError/invalidSetting(key:value:reason:)`` and changes nothing when it cannot.
    public mutating func set(_ key: String, to value: String) throws(ListrError) {
        guard let known = Key(rawValue: key) else { throw .unknownSetting(key) }
        switch known {
        case .logLevel:
            guard let level = LogLevel(rawValue: value) else {
                throw .invalidSetting(key: key, value: value, reason: "the levels are \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            logLevel = level
        case .name:
            do {
                try Self.validate(name: value)
            } catch {
                throw .invalidSetting(key: key, value: value, reason: error.reason)
            }
            name = value
        case .itemLimit:
            guard let limit = Int(value) else {
                throw .invalidSetting(key: key, value: value, reason: "it is not a whole number")
            }
            do {
                try Self.validate(itemLimit: limit)
            } catch {
                throw .invalidSetting(key: key, value: value, reason: error.reason)
            }
            itemLimit = limit
        }
    }

    /// A setting's value that breaks a rule, with the rule as a clause.
    public struct Violation: Error, CustomStringConvertible {
        /// The rule, e.g. "it is longer than 63 bytes".
        public var reason: String
        /// The rule as a sentence.
        public var description: String { "A setting is invalid: \(reason)." }
    }

    private static func validate(name: String) throws(Violation) {
        if name.allSatisfy(\.isWhitespace) { throw Violation(reason: "it is blank") }
        if name.utf8.count > maximumNameLength {
            throw Violation(reason: "it is \(name.utf8.count) bytes long and a name has at most \(maximumNameLength)")
        }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw Violation(reason: "it contains a control character")
        }
    }

    private static func validate(itemLimit: Int) throws(Violation) {
        guard (1...maximumItemLimit).contains(itemLimit) else {
            throw Violation(reason: "the limit is between 1 and \(maximumItemLimit)")
        }
    }
}
