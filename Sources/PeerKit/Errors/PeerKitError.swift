// ## Adding a code (for contributors)
//
// Each code lives in one place, in the file of its topic (`PeerKitError+Setup.swift`,
// `+Connection`, `+Messaging`, `+Security`, `+Resources`): its `Code` constant, and the
// static function that makes it, which names its values and writes its sentence. To add one,
// edit that one file:
//
// ```swift
// extension PeerKitError.Code {
//     /// A peer sent a message older than we keep.
//     public static let messageTooOld = Self("messageTooOld")
// }
//
// extension PeerKitError {
//     /// A peer sent a message older than we keep.
//     public static func messageTooOld(peer: String, age: Duration) -> PeerKitError {
//         PeerKitError(.messageTooOld, ["peer": .text(peer), "age": .duration(age)],
//                      "\(peer.capitalizedFirst) sent a message \(age.peerKitSeconds) old; it was dropped.")
//     }
//
//     /// The `age` the sentence names, for the codes that have one (`messageTooOld`); nil for the others.
//     public var age: Duration? { duration("age") }
// }
// ```
//
// A value named like one that exists already (`peer`, `reason`, …) is read by the accessor that
// exists; a new name gets its accessor beside the code (as `age` above). Pass
// `isSecurityRefusal: true` when the error refuses a peer for security reasons. Nothing else in
// the library changes. Its test: add the error and its sentence to the list in
// `Tests/PeerKitTests/Errors/PeerKitErrorSentenceTests.swift`, which holds every code's sentence.

/// The one error type PeerKit throws and reports.
///
/// Every error's ``description`` is a full sentence that names the values involved and, where
/// there is something to do about it, says what. ``code`` says which error it is; new codes may
/// be added in any release, so compare codes rather than switching over them exhaustively:
///
/// ```swift
/// do {
///     let reply = try await transceiver.request(command, to: peer, expecting: Reply.self)
/// } catch let error as PeerKitError where error.code == .requestTimedOut {
///     print("No answer within \(error.timeout ?? .zero): \(error)")
/// }
/// ```
///
/// Errors are made with static functions named after their codes
/// (`PeerKitError.peerNotConnected(peer: "Kitchen")`), and two errors are equal when their codes
/// and values are, so `#expect(throws: PeerKitError.notRunning)` works as it did when this was an enum.
public struct PeerKitError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Which error a ``PeerKitError`` is. More codes may be added in any release.
    ///
    /// The codes are defined beside the functions that make their errors, in the
    /// `PeerKitError+Topic.swift` files.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        /// A code named `name`, which must be the name of its static constant.
        init(_ name: String) {
            self.name = name
        }

        /// The code's name, as in `PeerKitError.Code.requestTimedOut`.
        public var description: String { name }
    }

    /// One value a sentence names.
    enum Value: Hashable, Sendable {
        case text(String)
        case number(Int)
        case duration(Duration)
    }

    /// Which error this is.
    public let code: Code

    /// The values the sentence names, by the names of their accessors (`"peer"`, `"reason"`, …).
    let values: [String: Value]

    /// The error as a sentence naming the values involved: what happened and what to do.
    public let description: String

    /// Whether the error refused a peer for security reasons (key, mode, TLS). Such a peer is not
    /// redialled until it is discovered again, and a refusal is logged once per host, kind (code)
    /// and episode.
    public let isSecurityRefusal: Bool

    /// An error of `code` with its values and its sentence; used by the static function of each code.
    ///
    /// The sentence is kept on one line, whatever its values hold: control characters in it are
    /// escaped (``LogSafe``). A peer chooses its name, and reasons and types come from the network,
    /// so a `\n` in one would otherwise forge a line in the log of every program that logs the
    /// error. The values keep their text as it came, for code that reads them.
    init(_ code: Code, _ values: [String: Value], _ description: String, isSecurityRefusal: Bool = false) {
        self.code = code
        self.values = values
        self.description = LogSafe.text(description, maximumBytes: .max)
        self.isSecurityRefusal = isSecurityRefusal
    }

    // The sentence and the refusal flag follow from the code and the values.
    public static func == (lhs: PeerKitError, rhs: PeerKitError) -> Bool {
        lhs.code == rhs.code && lhs.values == rhs.values
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(values)
    }

    /// The text value named `name`, if this error has one.
    func text(_ name: String) -> String? {
        if case let .text(value)? = values[name] { value } else { nil }
    }

    /// The number named `name`, if this error has one.
    func number(_ name: String) -> Int? {
        if case let .number(value)? = values[name] { value } else { nil }
    }

    /// The duration named `name`, if this error has one.
    func duration(_ name: String) -> Duration? {
        if case let .duration(value)? = values[name] { value } else { nil }
    }

    // MARK: The values the sentences of several topics name
    // (a value only one topic's codes name has its accessor in that topic's file)

    /// The `peer` the sentence names, for the codes that have one (most codes about a connection, a message or a resource); nil for the others.
    public var peer: String? { text("peer") }

    /// The `reason` the sentence names, for the codes that have one; nil for the others.
    public var reason: String? { text("reason") }

    /// The `serviceType` the sentence names, for the codes that have one (`invalidServiceType`, `discoveryUnavailable`, `noPeerFound`); nil for the others.
    public var serviceType: String? { text("serviceType") }

    /// The `type` the sentence names, for the codes that have one (`noHandler`, `payloadDecodingFailed`, `encodingFailed`, `requestTimedOut`); nil for the others.
    public var type: String? { text("type") }

    /// The `name` the sentence names, for the codes that have one (`invalidPeerName`, and the resource codes); nil for the others.
    public var name: String? { text("name") }

    /// The `limit` the sentence names, for the codes that have one (`frameTooLarge`, `peerTooSlow`); nil for the others.
    public var limit: Int? { number("limit") }

    /// The `timeout` the sentence names, for the codes that have one (`requestTimedOut`, `noPeerFound`); nil for the others.
    public var timeout: Duration? { duration("timeout") }
}

extension String {
    /// The string with its first letter in upper case, to start a sentence with "the … peer at …".
    var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}

extension Duration {
    /// "2.5 s", for error messages.
    var peerKitSeconds: String {
        let (seconds, attoseconds) = self.components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        let rounded = (value * 1000).rounded() / 1000
        return rounded == rounded.rounded() ? "\(Int(rounded)) s" : "\(rounded) s"
    }
}
