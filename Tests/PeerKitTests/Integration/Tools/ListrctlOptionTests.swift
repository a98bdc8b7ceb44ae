import Testing

@Suite("listrctl's command line")
struct ListrctlOptionTests {
    @Test("global options work before the subcommand as after it", arguments: [
        ["--connect", "127.0.0.1:9", "--timeout", "1", "item", "list"],
        ["item", "list", "--connect", "127.0.0.1:9", "--timeout", "1"],
        ["--timeout", "1", "item", "--connect", "127.0.0.1:9", "list"],
    ])
    func globalOptions(arguments: [String]) async throws {
        // --insecure: no key file is needed (nobody, whom the tests run it as, cannot write one in ~root).
        let result = try await ToolRun.run("listrctl", arguments + ["--insecure"])
        // Nothing listens on port 9: the command ran and found no listrd (69), not a usage error (64).
        #expect(result.status == 69, "\(result.standardError)")
        #expect(result.standardError.contains("127.0.0.1:9"), "\(result.standardError)")
    }

    @Test("an unknown option is still a usage error")
    func unknownOption() async throws {
        let result = try await ToolRun.run("listrctl", ["--no-such-option", "item", "list"])
        #expect(result.status == 64)
    }
}
