/// The IP address families a transceiver listens on, and so the ones its service is advertised on.
///
/// A peer is told the addresses of every family its service is advertised on, and dials them;
/// advertising a family nobody listens on would have it dial addresses that refuse.
public struct AddressFamilies: OptionSet, Sendable, Hashable, CustomStringConvertible {
    /// The families as bits: 1 for IPv4, 2 for IPv6.
    public let rawValue: UInt8

    /// Families from their bits (1: IPv4, 2: IPv6).
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// IPv4.
    public static let ipv4 = AddressFamilies(rawValue: 1)
    /// IPv6.
    public static let ipv6 = AddressFamilies(rawValue: 2)
    /// IPv4 and IPv6: what a socket bound to `::` accepts (the default ``PeerConfiguration/listenHost``).
    public static let all: AddressFamilies = [.ipv4, .ipv6]

    /// `IPv4`, `IPv6`, `IPv4 and IPv6`, or `none`.
    public var description: String {
        switch (contains(.ipv4), contains(.ipv6)) {
        case (true, true): "IPv4 and IPv6"
        case (true, false): "IPv4"
        case (false, true): "IPv6"
        case (false, false): "none"
        }
    }
}
