import Foundation
import PeerKit
import ToolSupport

/// Why a `listrctl` command failed, as a sentence and an exit status.
enum ListrCtlError: Error, CustomStringConvertible {
    /// No daemon answered within the timeout.
    case noDaemon(serviceType: String, timeout: Duration, addresses: [PeerEndpoint])
    /// No daemon of this name answered within the timeout; `available` are the names that did.
    case noDaemonNamed(String, serviceType: String, timeout: Duration, available: [String])
    /// Several daemons answered and `--peer` did not say which one to use.
    case severalDaemons(serviceType: String, names: [String])
    /// PeerKit could not start, reach the daemon, or get its answer.
    case peerKit(PeerKitError)
    /// The daemon refused the command; the text is its sentence.
    case refused(String)
    /// The daemon answered with something this command cannot use.
    case unexpectedAnswer(String)
    /// The input file could not be read.
    case cannotRead(path: String, reason: String)
    /// The output file could not be written.
    case cannotWrite(path: String, reason: String)
    /// The command was cancelled before it was done.
    case cancelled
    /// The key file cannot be used.
    case keyFile(String)
    /// Every listrd found was refused for security: another key, or no key (--insecure).
    case securityRefused(PeerKitError, keyFile: String?)
    /// Every address given with `--connect` refused the handshake (another service type, not PeerKit).
    case handshakeRefused(PeerKitError, serviceType: String)
    /// The daemon closed (or reset) the connection during the TLS handshake without a TLS alert:
    /// no key was compared (a daemon with another key says so with an alert), it was busy or
    /// going away (its handshake slots were full, or it was restarting).
    case handshakeInterrupted(PeerKitError)

    /// Whether `error` ended a handshake with no verdict on the key: the peer closed or reset the
    /// connection before TLS said anything (a key mismatch is `keyMismatch`, from a TLS alert).
    static func isInterruptedHandshake(_ error: PeerKitError) -> Bool {
        error.code == .securityHandshakeFailed
    }

    /// Wraps an error thrown while talking to the daemon.
    init(_ error: any Error) {
        switch error {
        case let error as ListrCtlError: self = error
        case let error as PeerKitError: self = .peerKit(error)
        default: self = .cancelled  // PeerKit throws only PeerKitError; the rest is CancellationError
        }
    }

    var description: String {
        switch self {
        case let .noDaemon(serviceType, timeout, addresses) where !addresses.isEmpty:
            return "No listrd of service type \"\(serviceType)\" answered at \(addresses.map(\.description).joined(separator: ", ")) within \(Self.seconds(timeout)). Check that listrd is running and listens there (its log says on which port)."
        case let .noDaemon(serviceType, timeout, _):
            return "No listrd of service type \"\(serviceType)\" was found within \(Self.seconds(timeout)). Check that listrd is running (with --service-type \(serviceType)) and that avahi-daemon is running: \"avahi-browse -rt _\(serviceType)._tcp\" should list it."
        case let .noDaemonNamed(name, serviceType, timeout, available):
            let found = available.isEmpty
                ? "none was found; check that listrd is running and that avahi-daemon is running"
                : "the ones found are \(Self.list(available)); pass one of them to --peer"
            return "No listrd named \(TerminalSafe.quoted(name)) of service type \"\(serviceType)\" answered within \(Self.seconds(timeout)): \(found)."
        case let .severalDaemons(serviceType, names):
            return "Several listrd of service type \"\(serviceType)\" are running: \(Self.list(names)). Choose one with --peer NAME."
        case let .peerKit(error) where error.code == .discoveryUnavailable:
            let serviceType = error.serviceType ?? "?"
            let reason = error.reason ?? "discovery does not work"
            return "listrd (service type \"\(serviceType)\") cannot be discovered: \(reason). Start avahi-daemon (scripts/avahi-up starts one restricted to loopback), or give listrd's address with --connect HOST:PORT (its log says on which port it listens)."
        case let .peerKit(error) where error.code == .peerExited:
            // Its process ended while this command waited for it (a crash: no goodbye).
            let refusal = error.reason.map { " (\($0))" } ?? ""
            return "listrd stopped before it answered: its connection closed without a goodbye, and nothing listens at its address any more\(refusal). It may or may not have carried out the command; start it again, then check with \"listrctl item list\" (or \"listrctl store dump\")."
        case let .peerKit(error):
            return error.description
        case let .refused(reason):
            return reason
        case let .unexpectedAnswer(what):
            return "listrd answered with \(what), which this command does not expect. Check that listrd and listrctl are the same version."
        case let .cannotRead(path, reason):
            return "The file \(path) cannot be read: \(reason). Nothing was sent."
        case let .cannotWrite(path, reason):
            return "The dump could not be written to \(path): \(reason). Check the folder and its permissions."
        case let .keyFile(sentence):
            return sentence
        case let .securityRefused(error, keyFile):
            let hint = keyFile.map { "listrctl uses the key in \($0) (--key-file, LISTR_KEY_FILE): give listrd and listrctl the same key file" }
                ?? "listrctl runs with --insecure: drop it to use the key file listrd uses"
            return "listrctl cannot talk to listrd safely, so nothing was sent. \(error.description) \(hint)."
        case let .handshakeInterrupted(error):
            let who = error.peer.map { "listrd (\($0))" } ?? "listrd"
            return "\(who) closed the connection during the TLS handshake, before any key was checked (a listrd with another key says so in the handshake; this one said nothing), and it did so until the timeout, so nothing was sent. It may be busy, with as many connections waiting for their handshake as it accepts (a flood of connections does that), or restarting. Try again, or give a longer --timeout; if it keeps happening, look at listrd's log."
        case let .handshakeRefused(error, serviceType):
            return "What listens there is not a listrd of service type \"\(serviceType)\": \(error.description) Check the address, or give --service-type the type listrd advertises."
        case .cancelled:
            return "listrctl was interrupted before it was done; if the command had been sent, run \"listrctl item list\" to see whether listrd applied it."
        }
    }

    /// The exit status (see `listrctl --help`).
    var exitCode: Int32 {
        switch self {
        case .refused: 1
        case .cannotRead: 66
        case .noDaemon, .noDaemonNamed, .severalDaemons, .peerKit, .unexpectedAnswer, .cancelled, .handshakeRefused, .handshakeInterrupted: 69
        case .cannotWrite: 73
        case .securityRefused: 77
        case .keyFile: 78
        }
    }

    private static func list(_ names: [String]) -> String {
        names.map(TerminalSafe.quoted).joined(separator: ", ")
    }

    private static func seconds(_ duration: Duration) -> String {
        let (whole, atto) = duration.components
        let value = Double(whole) + Double(atto) / 1e18
        return value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
