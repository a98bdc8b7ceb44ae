import CAvahi
import Logging

/// Advertises one DNS-SD service through an Avahi entry group, renaming it on collisions.
///
/// Every method runs on the Avahi poll thread, or on another thread that holds the threaded
/// poll's lock (see ``AvahiSession``); so does the entry group callback.
final class AvahiPublisher {
    /// `_<serviceType>._tcp`.
    private let type: String
    private let port: UInt16
    private let txtRecord: [String: String]
    /// The Avahi protocol to publish on: IPv4 mDNS, IPv6 mDNS, or both (`AVAHI_PROTO_UNSPEC`),
    /// after the families the transceiver listens on.
    private let avahiProtocol: AvahiProtocol
    private let serviceType: String
    private let emit: (DiscoveryEvent) -> Void
    private let logger: Logger

    /// The instance name: the requested one, or its alternative after a collision.
    private(set) var name: String
    /// The entry group on the current client; freed with the client.
    private var group: OpaquePointer?
    /// The poll, for the timer that re-registers after a collision.
    private let poll: UnsafePointer<AvahiPoll>
    /// Fires the delayed re-registration after a collision with another host.
    private var retryTimer: OpaquePointer?
    /// Collisions with other hosts since the service was last established.
    private var networkCollisions = 0

    init(serviceType: String, name: String, port: UInt16, txtRecord: [String: String], families: AddressFamilies,
         poll: UnsafePointer<AvahiPoll>, logger: Logger, emit: @escaping (DiscoveryEvent) -> Void) {
        self.poll = poll
        self.serviceType = serviceType
        self.type = "_\(serviceType)._tcp"
        self.name = name
        self.port = port
        self.txtRecord = txtRecord
        self.avahiProtocol = Self.avahiProtocol(for: families)
        self.logger = logger
        self.emit = emit
    }

    /// Registers the service on `client` (which is running) unless it is registered already.
    func publish(on client: OpaquePointer) {
        if group == nil {
            group = avahi_entry_group_new(client, { group, state, context in
                guard let context else { return }
                Unmanaged<AvahiPublisher>.fromOpaque(context).takeUnretainedValue().groupChanged(group, to: state)
            }, Unmanaged.passUnretained(self).toOpaque())
            guard group != nil else {
                reportFailure("Avahi could not create an entry group", client: client)
                return
            }
        }
        guard let group, avahi_entry_group_is_empty(group) != 0 else { return }
        addService(to: group)
    }

    /// Withdraws the service (the daemon is renaming its host); ``publish(on:)`` registers it again.
    func withdraw() {
        if let group { avahi_entry_group_reset(group) }
    }

    /// The client is about to be freed, and the entry group with it.
    func clientWillBeFreed() {
        group = nil
    }

    /// Frees the retry timer. Call once the poll thread has stopped.
    func stop() {
        if let retryTimer { peerkit_avahi_timeout_free(poll, retryTimer) }
        retryTimer = nil
    }

    // MARK: - Private

    /// Adds the service under `name`, choosing alternative names while the daemon already holds one, and commits.
    private func addService(to group: OpaquePointer) {
        let txt = TXTRecord.makeStringList(txtRecord)
        defer { avahi_string_list_free(txt) }
        for _ in 0..<100 {
            let result = avahi_entry_group_add_service_strlst(
                group, AvahiIfIndex(AVAHI_IF_UNSPEC), avahiProtocol, AvahiPublishFlags(0),
                name, type, nil, nil, port, txt)
            if result == Int32(AVAHI_ERR_COLLISION) {
                // Another service on this daemon has the name: pick the next one and try again.
                rename()
                avahi_entry_group_reset(group)
                continue
            }
            guard result >= 0 else {
                reportFailure("Avahi could not add the service \"\(name)\" (\(AvahiError.message(result)))")
                return
            }
            let committed = avahi_entry_group_commit(group)
            if committed < 0 {
                reportFailure("Avahi could not register the service \"\(name)\" (\(AvahiError.message(committed)))")
            }
            return
        }
        reportFailure("no free name was found for the service after 100 attempts")
    }

    private func groupChanged(_ group: OpaquePointer?, to state: AvahiEntryGroupState) {
        guard let group else { return }
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            networkCollisions = 0
            logger.debug("Advertised", metadata: ["name": "\(name)", "type": "\(type)", "port": "\(port)"])
            emit(.advertised(name: name))
        case AVAHI_ENTRY_GROUP_COLLISION:
            // Another host on the network holds the name, or probed for it at the same moment. Two
            // hosts that collided together would pick the same next name together, again and again:
            // wait a random while first, in a window that grows with each collision (RFC 6762 §8.1).
            rename()
            avahi_entry_group_reset(group)
            networkCollisions += 1
            let window = min(1000 * networkCollisions, 5000)
            scheduleRetry(afterMilliseconds: UInt32(Int.random(in: 0..<window)))
        case AVAHI_ENTRY_GROUP_FAILURE:
            reportFailure("Avahi could not register the service \"\(name)\"", client: avahi_entry_group_get_client(group))
        default:
            break
        }
    }

    private func scheduleRetry(afterMilliseconds delay: UInt32) {
        if let retryTimer {
            peerkit_avahi_timeout_update(poll, retryTimer, delay)
            return
        }
        retryTimer = peerkit_avahi_timeout_new(poll, delay, { _, context in
            guard let context else { return }
            Unmanaged<AvahiPublisher>.fromOpaque(context).takeUnretainedValue().retryTimerFired()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    private func retryTimerFired() {
        guard let group, avahi_entry_group_is_empty(group) != 0 else { return }
        addService(to: group)
    }

    /// A service published on IPv4 mDNS is resolved by peers to the host's IPv4 addresses, one
    /// published on IPv6 mDNS to its IPv6 addresses (see ``AvahiBrowser``); both when both.
    private static func avahiProtocol(for families: AddressFamilies) -> AvahiProtocol {
        switch (families.contains(.ipv4), families.contains(.ipv6)) {
        case (true, false): AvahiProtocol(AVAHI_PROTO_INET)
        case (false, true): AvahiProtocol(AVAHI_PROTO_INET6)
        default: AvahiProtocol(AVAHI_PROTO_UNSPEC)
        }
    }

    private func rename() {
        guard let alternative = avahi_alternative_service_name(name) else { return }
        defer { avahi_free(alternative) }
        let next = String(cString: alternative)
        logger.info("The service name is taken; advertising under another", metadata: ["taken": "\(name)", "name": "\(next)"])
        name = next
    }

    /// Reports `reason`, followed by the client's last error when `client` is given.
    private func reportFailure(_ reason: String, client: OpaquePointer? = nil) {
        let detail = client.map { "\(reason) (\(AvahiError.message(avahi_client_errno($0))))" } ?? reason
        logger.warning("Advertising failed", metadata: ["reason": "\(detail)"])
        emit(.failed(.discoveryUnavailable(serviceType: serviceType, reason: detail)))
    }
}
