import ArgumentParser
import PeerKit
import ToolSupport

/// `listrctl`: drives a running `listrd` from the command line.
@main
struct ListrCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listrctl",
        abstract: "Control a listrd to-do list from the command line.",
        discussion: """
        listrctl finds listrd through avahi-daemon (DNS-SD service type "listrctl" unless --service-type says \
        otherwise), sends it one command, prints the answer and exits. The options below go before or after \
        the subcommand: "listrctl --connect 127.0.0.1:7000 item list" and "listrctl item list --connect \
        127.0.0.1:7000" are the same.

        \(ExitStatus.help([.success, .refused, .usage, .noInput, .unavailable, .cannotCreate, .noPermission, .configuration]))
        """,
        version: PeerKitVersion.current,
        subcommands: [Item.self, Store.self, Config.self, Watch.self]
    )

    /// The options every subcommand takes, accepted here too so that they may come before the
    /// subcommand: ArgumentParser parses this group leniently over the whole command line, and the
    /// subcommands' `@OptionGroup var options: ClientOptions` receive the same value.
    @OptionGroup var options: ClientOptions
}
