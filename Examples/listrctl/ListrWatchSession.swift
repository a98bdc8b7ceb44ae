import Foundation
import ListrKit
import PeerKit

/// A watch that outlives listrd restarts: connects, sends ``WatchCommand``, hands the list and
/// then every change to a ``WatchView``; when the connection ends it says so, reconnects (to the
/// same daemon, found the same way, following a rename it was told of) and starts over from the
/// current list. It ends only with the process (Ctrl-C), or with an error before the first
/// connection.
struct ListrWatchSession {
    /// How long to wait between two attempts to reach a daemon that is not back yet.
    static let retryDelay: Duration = .milliseconds(250)

    /// What arrives on the connection while watching.
    private enum Input: Sendable {
        case change(ListrChange)
        case ended(WatchEndedEvent)
        /// The daemon was disconnected, with PeerKit's reason (none for an orderly stop).
        case disconnected(PeerKitError?)
    }

    let options: ClientOptions

    /// Watches until the process ends. Throws only when the first connection fails.
    func run(_ view: some WatchView) async throws(ListrCtlError) -> Never {
        var options = options
        var reconnecting = false
        while true {
            let client: ListrClient
            do {
                client = try await ListrClient.connect(options)
            } catch {
                guard reconnecting else { throw error }
                try? await Task.sleep(for: Self.retryDelay)
                continue
            }
            let (inputs, continuation) = AsyncStream.makeStream(of: Input.self)
            client.transceiver.receive(ListrChange.self) { continuation.yield(.change($0)) }
            client.transceiver.receive(WatchEndedEvent.self) { continuation.yield(.ended($0)) }
            let daemon = client.daemon
            // Subscribed before anything is sent, so that no disconnection is missed; the event
            // carries the reason, which the view shows.
            let events = client.transceiver.events()
            let disconnections = Task {
                for await event in events {
                    if case let .peerDisconnected(peer, reason) = event, peer == daemon {
                        continuation.yield(.disconnected(reason))
                    }
                }
            }
            defer { disconnections.cancel() }
            do throws(ListrCtlError) {
                let dump = try await client.data(for: WatchCommand())
                var items: [ListrKit.Item]
                do {
                    items = try ItemPropertyList.decode(dump)
                } catch {
                    throw ListrCtlError.unexpectedAnswer("a list that does not decode (\(error))")
                }
                // A list larger than one answer comes as its first page: the rest is read page by
                // page (changes made meanwhile may show in it and as events too).
                if !items.isEmpty {
                    items += try await client.items(limit: nil, offset: items.count)
                }
                try await view.show(items, from: daemon.name, reconnected: reconnecting, client: client)
                reconnecting = true
                loop: for await input in inputs {
                    switch input {
                    case let .change(change):
                        if let name = change.settings?.name, options.peer != nil {
                            options.peer = name  // listrd was renamed: find it by its new name
                        }
                        try await view.apply(change, client: client)
                    case let .ended(ended):
                        view.lost(daemon.name, reason: ended.reason)
                        break loop
                    case let .disconnected(reason):
                        view.lost(daemon.name, reason: reason?.description)
                        break loop
                    }
                }
            } catch {
                if !reconnecting {
                    await client.disconnect()
                    throw error
                }
                view.lost(daemon.name, reason: error.description)
            }
            continuation.finish()
            await client.disconnect()
            reconnecting = true
        }
    }
}

/// What a watch shows: `listrctl watch` prints events, `item list --watch` redraws the list.
protocol WatchView: Sendable {
    /// The list as it is on (re)connecting to `daemon`.
    func show(_ items: [ListrKit.Item], from daemon: String, reconnected: Bool, client: ListrClient) async throws(ListrCtlError)
    /// A change made after that.
    func apply(_ change: ListrChange, client: ListrClient) async throws(ListrCtlError)
    /// The connection to `daemon` ended; a reconnection follows.
    func lost(_ daemon: String, reason: String?)
}
