import ArgumentParser

/// `listrctl`: drives a running `listrd` from the command line.
@main
struct ListrCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listrctl",
        abstract: "Control a listrd to-do list from the command line.",
        discussion: """
        listrctl finds listrd through avahi-daemon (DNS-SD service type "listrctl" unless --service-type says \
        otherwise), sends it one command, prints the answer and exits.

        Exit status: 0 when the command was done; 1 when listrd refused it; 66 when the input file cannot be \
        read; 69 when no single listrd answered; 73 when the output file cannot be written; 77 when every listrd \
        found has another key or none (nothing was sent); 78 when the key file cannot be used; 64 for a usage error.
        """,
        subcommands: [Item.self, Store.self]
    )
}
