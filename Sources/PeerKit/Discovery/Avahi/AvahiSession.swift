import CAvahi
import Foundation
import Logging
import Synchronization

/// One running Avahi discovery: a threaded poll, the client on it (created again whenever the
/// daemon goes away), the advertisement and the browser.
///
/// Threading: Avahi calls every callback (client, entry group, browser, resolver, timeout) on the
/// poll's own thread with the poll's lock held. Everything else that touches Avahi objects or this
/// session's mutable state takes that lock first (`avahi_threaded_poll_lock`), except where the
/// poll thread has been stopped. Taking the lock or stopping the poll from inside a callback
/// aborts, so ``stop()`` recognises the poll thread and hands the teardown to another thread.
final class AvahiSession: @unchecked Sendable {
    // @unchecked Sendable: the stored `var`s below are only read and written with the threaded
    // poll's lock held (in callbacks, or between avahi_threaded_poll_lock/unlock), or after the
    // poll thread has been joined in `shutdown()`. `pollThread` is a Mutex; the rest is immutable.

    private let request: DiscoveryRequest
    private let onEvent: @Sendable (DiscoveryEvent) -> Void
    private let logger: Logger
    private let threadedPoll: OpaquePointer
    private let poll: UnsafePointer<AvahiPoll>

    private var client: OpaquePointer?
    private var machine = AvahiConnectionStateMachine()
    /// Fires `connectTimerFired()`: creates the first client, and every new one after a failure.
    private var connectTimer: OpaquePointer?
    private var publisher: AvahiPublisher?
    private var browser: AvahiBrowser?
    /// Set (under the lock) when stopping starts; no event is delivered afterwards.
    private var isStopped = false
    /// The poll thread, recorded by the first timer callback.
    private let pollThread = Mutex<pthread_t?>(nil)

    /// Creates a session for `request`, or returns nil when Avahi cannot create its poll thread's state.
    /// `advertises` is false when the TXT record is invalid: the session then only browses.
    init?(request: DiscoveryRequest, advertises: Bool, logger: Logger, onEvent: @escaping @Sendable (DiscoveryEvent) -> Void) {
        guard let threadedPoll = avahi_threaded_poll_new(), let poll = avahi_threaded_poll_get(threadedPoll) else { return nil }
        self.request = request
        self.logger = logger
        self.onEvent = onEvent
        self.threadedPoll = threadedPoll
        self.poll = poll
        let emit: (DiscoveryEvent) -> Void = { [unowned self] event in self.emit(event) }
        if advertises, let port = request.port, let port = UInt16(exactly: port) {
            publisher = AvahiPublisher(serviceType: request.serviceType, name: request.peerName, port: port,
                                       txtRecord: request.txtRecord, families: request.addressFamilies,
                                       poll: poll, logger: logger, emit: emit)
        }
        browser = AvahiBrowser(serviceType: request.serviceType, ownPeerID: request.peerID, logger: logger, emit: emit)
    }

    deinit {
        avahi_threaded_poll_free(threadedPoll)
    }

    /// Starts the poll thread and, on it, the first client. Returns false when the thread cannot start.
    /// Does nothing after ``stop()``, even when the two race.
    func start() -> Bool {
        avahi_threaded_poll_lock(threadedPoll)
        defer { avahi_threaded_poll_unlock(threadedPoll) }
        guard !isStopped, connectTimer == nil else { return true }
        connectTimer = peerkit_avahi_timeout_new(poll, 0, { _, context in
            guard let context else { return }
            Unmanaged<AvahiSession>.fromOpaque(context).takeUnretainedValue().connectTimerFired()
        }, Unmanaged.passUnretained(self).toOpaque())
        return connectTimer != nil && avahi_threaded_poll_start(threadedPoll) >= 0
    }

    /// Stops everything. No event is delivered after it returns; Avahi's objects are freed before
    /// it returns, unless it is called from inside an event (on the poll thread), in which case
    /// another thread frees them as soon as the current callback returns.
    func stop() {
        let onPollThread = pollThread.withLock { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
        if onPollThread {
            isStopped = true  // The lock is held: we are inside a callback.
            Thread.detachNewThread { self.shutdown() }
        } else {
            shutdown()
        }
    }

    // MARK: - Client lifecycle

    private func shutdown() {
        avahi_threaded_poll_lock(threadedPoll)
        isStopped = true
        avahi_threaded_poll_unlock(threadedPoll)
        avahi_threaded_poll_stop(threadedPoll)  // Joins the poll thread; nothing runs on it afterwards.
        discardClient()
        if let connectTimer { peerkit_avahi_timeout_free(poll, connectTimer) }
        connectTimer = nil
        publisher?.stop()
        logger.debug("Avahi discovery stopped", metadata: ["type": "\(request.serviceType)"])
    }

    private func connectTimerFired() {
        pollThread.withLock { $0 = pthread_self() }
        guard !isStopped else { return }
        discardClient()
        var error: Int32 = 0
        let created = avahi_client_new(poll, AVAHI_CLIENT_NO_FAIL, { client, state, context in
            guard let context else { return }
            Unmanaged<AvahiSession>.fromOpaque(context).takeUnretainedValue().clientChanged(client, to: state)
        }, Unmanaged.passUnretained(self).toOpaque(), &error)
        if let created {
            client = created
        } else {
            apply(machine.clientCreationFailed(code: error, message: AvahiError.message(error)))
        }
    }

    private func clientChanged(_ client: OpaquePointer?, to state: AvahiClientState) {
        guard let client, !isStopped else { return }
        // The first callbacks come from inside avahi_client_new, before it returns the client.
        self.client = client
        let change: AvahiConnectionStateMachine.ClientState
        switch state {
        case AVAHI_CLIENT_S_RUNNING: change = .running
        case AVAHI_CLIENT_S_REGISTERING: change = .registering
        case AVAHI_CLIENT_S_COLLISION: change = .collision
        case AVAHI_CLIENT_CONNECTING: change = .connecting
        default:
            let code = avahi_client_errno(client)
            change = .failure(code: code, message: AvahiError.message(code))
        }
        logger.debug("Avahi client state changed", metadata: ["state": "\(change)"])
        apply(machine.clientChanged(to: change))
    }

    private func apply(_ actions: [AvahiConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case let .connect(delay):
                // Never free the client here: this may be its own callback. The timer does it.
                let milliseconds = UInt32(clamping: delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000)
                if let connectTimer { peerkit_avahi_timeout_update(poll, connectTimer, milliseconds) }
            case .startServices:
                guard let client else { continue }
                publisher?.publish(on: client)
                browser?.browse(on: client)
            case .withdrawAdvertisement:
                publisher?.withdraw()
            case let .reportFailure(reason):
                logger.warning("Avahi discovery is unavailable", metadata: ["type": "\(request.serviceType)", "reason": "\(reason)"])
                emit(.failed(.discoveryUnavailable(serviceType: request.serviceType, reason: reason)))
            case .reportRecovery:
                logger.info("Avahi discovery works again", metadata: ["type": "\(request.serviceType)"])
                emit(.recovered)
            }
        }
    }

    /// Frees the client, and with it the entry group, the browser and the resolvers.
    private func discardClient() {
        guard let client else { return }
        publisher?.clientWillBeFreed()
        browser?.clientWillBeFreed()
        avahi_client_free(client)
        self.client = nil
    }

    private func emit(_ event: DiscoveryEvent) {
        guard !isStopped else { return }
        onEvent(event)
    }
}
