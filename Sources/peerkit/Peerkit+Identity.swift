import ArgumentParser
import Foundation
import PeerKit
import ToolSupport

extension Peerkit {
    /// `peerkit identity create|show PATH`: certificate identities for `--identity`.
    struct Identity: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create or show a certificate identity for the certificates security mode.",
            discussion: """
            An identity is a P-256 key pair and a self-signed certificate, kept as PATH.pem \
            (certificate) and PATH.key (private key, mode 0600). Its fingerprint, the SHA-256 of its \
            public key, is the peer's ID in certificates mode; other peers pin it with --trust.

            \(ExitStatus.help([.success, .usage, .cannotCreate, .configuration]))
            """,
            subcommands: [Create.self, Show.self]
        )

        /// `peerkit identity create PATH`.
        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Make a new identity, write PATH.pem and PATH.key, and print its fingerprint.",
                discussion: "Existing files are never overwritten."
            )

            @Argument(help: ArgumentHelp("Where to write the identity: PATH.pem and PATH.key.", valueName: "path"))
            var path: String

            @Option(help: ArgumentHelp("The certificate's common name, for people reading it (default: the host name).", valueName: "name"))
            var name: String?

            func run() async throws {
                do {
                    let identity = try PeerIdentity.generate(name: name ?? PeerConfiguration.defaultPeerName)
                    try identity.write(certificateFile: path + ".pem", keyFile: path + ".key")
                    print(identity.fingerprint)
                } catch {
                    FileHandle.standardError.write(Data("peerkit: \(Output.safe("\(error)"))\n".utf8))
                    throw ExitStatus.cannotCreate.exitCode
                }
            }
        }

        /// `peerkit identity show PATH`.
        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Print the fingerprint of the identity PATH.pem and PATH.key."
            )

            @Argument(help: ArgumentHelp("The identity: PATH.pem and PATH.key.", valueName: "path"))
            var path: String

            func run() async throws {
                do {
                    print(try PeerIdentity(certificateFile: path + ".pem", keyFile: path + ".key").fingerprint)
                } catch {
                    FileHandle.standardError.write(Data("peerkit: \(Output.safe("\(error)"))\n".utf8))
                    throw ExitStatus.configuration.exitCode
                }
            }
        }
    }
}
