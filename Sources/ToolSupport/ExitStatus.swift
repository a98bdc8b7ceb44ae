import ArgumentParser

/// The exit statuses of `peerkit`, `listrd` and `listrctl`, one table for all three
/// (the values are those of BSD's `sysexits.h`).
///
/// Documentation/Listr.md and Documentation/Inspector.md print this table; `--help` shows it too.
public enum ExitStatus: Int32, CaseIterable, Sendable {
    /// The command was done.
    case success = 0
    /// The peer refused the command, or answered with an error.
    case refused = 1
    /// The command line was wrong (ArgumentParser's validation failure).
    case usage = 64
    /// An input file could not be read.
    case noInput = 66
    /// No peer answered in time, or PeerKit could not reach one (discovery, connection, timeout).
    case unavailable = 69
    /// The program itself failed (could not listen, could not open its store).
    case software = 70
    /// An output file could not be written.
    case cannotCreate = 73
    /// Every peer found was refused for security: another key, or none (nothing was sent).
    case noPermission = 77
    /// The key file (or another configuration file) cannot be used: unreadable, malformed, or
    /// readable by other users.
    case configuration = 78

    /// What the status means, as a phrase.
    public var meaning: String {
        switch self {
        case .success: "the command was done"
        case .refused: "the peer refused the command or answered with an error"
        case .usage: "the command line was wrong"
        case .noInput: "an input file could not be read"
        case .unavailable: "no peer answered in time, or none could be reached"
        case .software: "the program could not start (listen, open its store)"
        case .cannotCreate: "an output file could not be written"
        case .noPermission: "every peer found has another key or none, so nothing was sent"
        case .configuration: "the key file cannot be used (unreadable, malformed or readable by others)"
        }
    }

    /// The status as ArgumentParser's `ExitCode`, to throw from `run()`.
    public var exitCode: ExitCode { ExitCode(rawValue) }

    /// The table for a command's `discussion`: "Exit status: 0 when …; 1 when …".
    public static func help(_ statuses: [ExitStatus]) -> String {
        "Exit status: " + statuses.map { "\($0.rawValue) when \($0.meaning)" }.joined(separator: "; ") + "."
    }
}
