import ArgumentParser
import PeerKit
import ToolSupport

/// `peerkit`: an inspector for any PeerKit service type, as avahi-browse is for DNS-SD.
@main
struct Peerkit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peerkit",
        abstract: "Inspect and talk to the peers of any PeerKit service type.",
        discussion: """
        Each subcommand joins a service type as a peer of its own (it dials the others and, unless \
        --advertise is given, does not advertise itself), does its work, says bye and exits. The options \
        below go before or after the subcommand.

        \(ExitStatus.help([.success, .refused, .usage, .unavailable, .software, .noPermission]))
        """,
        version: PeerKitVersion.current,
        subcommands: [Browse.self, Tail.self, Send.self, Request.self, Ping.self, Node.self, Identity.self]
    )

    /// The options every subcommand takes, accepted here too so that they may come before the
    /// subcommand: ArgumentParser parses this group leniently over the whole command line, and the
    /// subcommands' `@OptionGroup var options: PeerOptions` receive the same value.
    @OptionGroup var options: PeerOptions
}
