import Glibc
import NIOCore
import NIOPosix

extension PeerEndpoint {
    /// The endpoint as a socket address when its host is an address literal, so that it is
    /// dialled without getaddrinfo. An IPv6 link-local address keeps its zone (`fe80::1%veth0`
    /// or `fe80::1%3`) as the socket address's scope ID, without which the kernel cannot know the
    /// interface to use. Nil for a host name, or a zone naming no interface.
    var socketAddress: SocketAddress? {
        guard let percent = host.firstIndex(of: "%") else {
            return try? SocketAddress(ipAddress: host, port: port)
        }
        let zone = String(host[host.index(after: percent)...])
        guard case let .v6(address)? = try? SocketAddress(ipAddress: String(host[..<percent]), port: port) else { return nil }
        let index = UInt32(zone) ?? if_nametoindex(zone)
        guard index != 0 else { return nil }
        var raw = address.address
        raw.sin6_scope_id = index
        return SocketAddress(raw, host: host)
    }

    /// The host without its zone: `fe80::1` for `fe80::1%veth0`.
    var hostWithoutZone: Substring {
        host.split(separator: "%", maxSplits: 1).first ?? host[...]
    }
}

/// The addresses of this host's interfaces, to recognise an endpoint that leads back to this
/// transceiver itself: an address every host has (a docker0-like bridge, the same private address
/// on every host), which another peer's avahi-daemon advertises beside its real ones.
enum LocalAddresses {
    /// Every address of every interface now, as text without zone (`10.0.0.2`, `fe80::1`); empty
    /// when the interfaces cannot be listed.
    static func current() -> Set<String> {
        guard let devices = try? System.enumerateDevices() else { return [] }
        return Set(devices.compactMap { $0.address?.ipAddress.map(normalised) })
    }

    /// Whether `endpoint` leads to this host's listener on `port`: its address is one of
    /// `addresses` and its port is ours. (A listener bound to the wildcard address accepts on
    /// every local address, so a connection there would only meet ourselves.)
    static func isOwn(_ endpoint: PeerEndpoint, addresses: Set<String>, port: Int?) -> Bool {
        guard let port, endpoint.port == port else { return false }
        return addresses.contains(normalised(String(endpoint.hostWithoutZone)))
    }

    /// The canonical text of an address literal (`::ffff:10.0.0.2` and `0:0::1` compare right);
    /// anything else lowercased as it is.
    private static func normalised(_ address: String) -> String {
        (try? SocketAddress(ipAddress: address, port: 0))?.ipAddress ?? address.lowercased()
    }
}
