import Foundation
import ListrKit
import PeerKit
import ToolSupport

extension ListrClient {
    /// After a daemon refused us for security, how long to wait for another daemon to be found
    /// before giving up. avahi-daemon answers a browse from its cache, so every daemon it knows is
    /// reported within milliseconds of the first.
    static let otherDaemonsDiscoveryDelay: Duration = .milliseconds(50)

    /// The longest wait for the daemons found to connect (or go away), so that several are told
    /// apart even on a slow machine. Only a daemon that is advertised but does not answer (mDNS
    /// keeps a withdrawn record for about a second) makes it last that long.
    static let otherDaemonsSettleLimit: Duration = .seconds(1)

    /// The daemon to use: the one named by `--peer`, or the only one there is.
    ///
    /// Only daemons that connect count: an advertisement that outlives its daemon is not a
    /// candidate, so a restarted daemon is not mistaken for two.
    static func findDaemon(on transceiver: PeerTransceiver, options: ClientOptions, events: AsyncStream<PeerEvent>) async throws -> Peer {
        let timeout = options.timeoutDuration
        if let name = options.peer {
            do {
                return try await waitForDaemon(on: transceiver, options: options, events: events) { $0.name == name }
            } catch let error as PeerKitError where error.code == .noPeerFound {
                let available = Set(transceiver.availablePeers.map(\.name)).sorted()
                throw ListrCtlError.noDaemonNamed(name, serviceType: options.serviceType, timeout: timeout, available: available)
            }
        }
        let first: Peer
        do {
            first = try await waitForDaemon(on: transceiver, options: options, events: events) { _ in true }
        } catch let error as PeerKitError where error.code == .noPeerFound {
            throw ListrCtlError.noDaemon(serviceType: options.serviceType, timeout: timeout, addresses: options.endpoints)
        }
        if options.endpoints.count == 1 {
            return first  // one address given: there is nothing else to notice
        }
        // Discovery lists the daemons avahi-daemon already knew of within milliseconds of the
        // first; once it has and each is connected (or gone), there is nothing left to wait for.
        await waitUntilSettled(transceiver, limit: otherDaemonsSettleLimit)
        let daemons = Set(transceiver.connectedPeers + [first])
        guard daemons.count == 1 else {
            throw ListrCtlError.severalDaemons(serviceType: options.serviceType, names: daemons.map(\.name).sorted())
        }
        return first
    }

    /// Waits for a daemon matching `predicate` to connect, like `waitForPeer`, and fails at once
    /// (with exit status 77) when every daemon found was refused for security: another key, or
    /// none; or (with exit status 69) when the last one closed the connection during the TLS
    /// handshake without saying why, which is no verdict on the key (a busy or restarting listrd). A refused daemon, such as a fake advertisement without the key, is never sent a
    /// command; with `--verbose` listrctl says it skipped it.
    private static func waitForDaemon(
        on transceiver: PeerTransceiver, options: ClientOptions, events: AsyncStream<PeerEvent>,
        where predicate: @escaping @Sendable (Peer) -> Bool
    ) async throws -> Peer {
        let timeout = options.timeoutDuration
        let addresses = options.endpoints.count
        let verbose = options.verbose
        let keyFile = options.insecure ? nil : ListrKeyFile.resolve(option: options.keyFile).path
        return try await withThrowingTaskGroup(of: Peer.self) { group in
            group.addTask { try await transceiver.waitForPeer(timeout: timeout, where: predicate) }
            group.addTask {
                var refused = 0
                var handshakesRefused = 0
                for await event in events {
                    guard case let .error(error) = event else { continue }
                    if addresses > 0, Self.isHandshakeRefusal(error) {
                        // With --connect, what answers is known to be no listrd as soon as the
                        // handshake is refused: say so at once, not after the timeout.
                        handshakesRefused += 1
                        guard handshakesRefused >= addresses else { continue }
                        throw ListrCtlError.handshakeRefused(error, serviceType: options.serviceType)
                    }
                    guard error.isSecurityRefusal else { continue }
                    refused += 1
                    if verbose {
                        // Cut off mid-handshake, a listrd is dialled again (it is busy or restarting); another is skipped.
                        let what = ListrCtlError.isInterruptedHandshake(error) ? "a listrd closed the connection during the TLS handshake; dialling it again" : "skipped a listrd"
                        FileHandle.standardError.write(Data("listrctl: \(what): \(TerminalSafe.text(error.description))\n".utf8))
                    }
                    if addresses > 0 {
                        guard refused >= addresses else { continue }
                    } else {
                        // Others found by the same browse are reported within milliseconds.
                        try await Task.sleep(for: otherDaemonsDiscoveryDelay)
                        guard !transceiver.availablePeers.contains(where: predicate) else { continue }
                    }
                    // A connection closed mid-handshake says nothing about the key: say what happened.
                    if ListrCtlError.isInterruptedHandshake(error) { throw ListrCtlError.handshakeInterrupted(error) }
                    throw ListrCtlError.securityRefused(error, keyFile: keyFile)
                }
                try await Task.sleep(for: timeout)  // the stream ended: leave the answer to waitForPeer
                throw PeerKitError.notRunning
            }
            defer { group.cancelAll() }
            guard let peer = try await group.next() else { throw PeerKitError.notRunning }
            return peer
        }
    }

    /// Whether `error` says the peer at an address refused the handshake or spoke no PeerKit.
    private static func isHandshakeRefusal(_ error: PeerKitError) -> Bool {
        if error.isSecurityRefusal { return false }
        return [.handshakeFailed, .remoteError, .malformedFrame, .frameTooLarge].contains(error.code)
    }

    /// Waits until discovery has listed the peers it knew of and every available peer is
    /// connected, or `limit` passes.
    private static func waitUntilSettled(_ transceiver: PeerTransceiver, limit: Duration) async {
        let events = transceiver.events()
        @Sendable func settled() -> Bool {
            guard transceiver.knownPeersListed else { return false }
            let connected = Set(transceiver.connectedPeers)
            return transceiver.availablePeers.allSatisfy(connected.contains)
        }
        if settled() { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in events where settled() { return }
            }
            group.addTask {
                try? await Task.sleep(for: limit)  // cancelled once settled
            }
            await group.next()
            group.cancelAll()
        }
    }
}
