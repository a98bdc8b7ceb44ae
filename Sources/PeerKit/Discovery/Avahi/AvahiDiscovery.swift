import Logging
import Synchronization

/// Finds peers through DNS-SD with the local avahi-daemon (mDNS), the default on Linux.
///
/// It advertises `_<serviceType>._tcp` in the `local` domain, with the peer name as the instance
/// name, the listening port, and the request's TXT record (`peerid`, `proto` and the user's
/// discovery info). It browses the same type, resolves every instance, ignores the ones carrying
/// its own `peerid`, and reports the others with their addresses, IPv4 first.
///
/// It survives the daemon: when avahi-daemon cannot be reached at start it reports
/// ``DiscoveryEvent/failed(_:)`` at once and keeps trying with a capped back-off; when the daemon
/// restarts, it creates a new client, advertises and browses again, and reports
/// ``DiscoveryEvent/recovered``.
///
/// Events are delivered on Avahi's own thread while it holds its lock: the closure must return
/// quickly and must not wait for another thread that is calling ``stop()``. It may call
/// ``stop()`` itself.
///
/// ```swift
/// let discovery = AvahiDiscovery()
/// discovery.start(request) { event in print(event) }
/// // ...
/// discovery.stop()
/// ```
public final class AvahiDiscovery: PeerDiscovery {
    private let logger: Logger
    private let session = Mutex<AvahiSession?>(nil)

    /// Creates an Avahi discovery backend that logs to `logger`.
    public init(logger: Logger = Logger(label: "PeerKit.Avahi")) {
        self.logger = logger
    }

    deinit {
        stop()
    }

    /// Starts advertising (when `request.port` is set) and browsing. Problems are reported through
    /// `onEvent` as ``DiscoveryEvent/failed(_:)``: an invalid service type stops everything, an
    /// invalid TXT pair stops only the advertisement. A second call while running is ignored.
    public func start(_ request: DiscoveryRequest, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void) {
        var logger = self.logger
        logger[metadataKey: "type"] = "\(request.serviceType)"
        do {
            try ServiceType.validate(request.serviceType)
        } catch {
            logger.error("Avahi discovery cannot start", metadata: ["error": "\(error)"])
            onEvent(.failed(error))
            return
        }
        var advertises = request.port != nil
        if let port = request.port, UInt16(exactly: port) == nil || port == 0 {
            let reason = "the port \(port) cannot be advertised, so this peer only browses"
            logger.error("The service is not advertised", metadata: ["reason": "\(reason)"])
            onEvent(.failed(.discoveryUnavailable(serviceType: request.serviceType, reason: reason)))
            advertises = false
        }
        do {
            try TXTRecord.validate(request.txtRecord)
        } catch {
            logger.error("The service is not advertised", metadata: ["error": "\(error)"])
            onEvent(.failed(error))
            advertises = false
        }
        guard let created = AvahiSession(request: request, advertises: advertises, logger: logger, onEvent: onEvent) else {
            fail("Avahi could not create its event loop", request: request, logger: logger, onEvent: onEvent)
            return
        }
        let isFirst = session.withLock { session in
            guard session == nil else { return false }
            session = created
            return true
        }
        guard isFirst else {
            logger.warning("AvahiDiscovery.start was called while it runs; the call is ignored")
            return
        }
        // Events may flow from here on; none is delivered while `session`'s lock is held, so the
        // event closure may call stop().
        if !created.start() {
            stop()
            fail("Avahi's event loop thread could not be started", request: request, logger: logger, onEvent: onEvent)
        }
    }

    private func fail(_ reason: String, request: DiscoveryRequest, logger: Logger, onEvent: @Sendable (DiscoveryEvent) -> Void) {
        logger.error("Avahi discovery cannot start", metadata: ["reason": "\(reason)"])
        onEvent(.failed(.discoveryUnavailable(serviceType: request.serviceType, reason: reason)))
    }

    /// Stops advertising and browsing and frees every Avahi resource. No event is delivered after
    /// it returns. Calling it twice, or before `start`, is harmless.
    public func stop() {
        session.withLock { session in
            defer { session = nil }
            return session
        }?.stop()
    }
}
