import ArgumentParser
import Foundation
import ListrKit
import ToolSupport

extension ListrCtl {
    /// `listrctl config …`: show and change listrd's settings, live.
    struct Config: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "config",
            abstract: "Show and change listrd's settings; a change applies at once.",
            discussion: """
            The settings are \(ListrSettings.Key.allCases.map(\.rawValue).joined(separator: ", ")). They are kept in the store, \
            so they survive a restart, and every change is announced to watchers.
            """,
            subcommands: [Get.self, Set.self, Reset.self]
        )
    }
}

extension ListrCtl.Config {
    /// `listrctl config get [KEY]`.
    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Print the settings, one 'key: value' line each, or the value of one.",
            discussion: "With --json, prints the settings as one JSON object."
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: ArgumentHelp("One setting to print.", valueName: "key"))
        var key: String?

        func validate() throws {
            if let key, ListrSettings.Key(rawValue: key) == nil {
                throw ValidationError(ListrError.unknownSetting(key).description)
            }
        }

        func run() async throws {
            try await options.run { client throws(ListrCtlError) in
                let data = try await client.data(for: GetSettingsCommand())
                let settings: ListrSettings
                do {
                    settings = try JSONDecoder().decode(ListrSettings.self, from: data)
                } catch {
                    throw .unexpectedAnswer("settings that do not decode (\(error))")
                }
                if options.json {
                    emit(settings)
                } else if let key = key.flatMap(ListrSettings.Key.init(rawValue:)) {
                    emit(TerminalSafe.text(settings.value(of: key)))
                } else {
                    emit(TerminalSafe.lines(settings.rendered))
                }
            }
        }
    }

    /// `listrctl config set KEY VALUE`.
    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Change one setting; it applies at once and is kept in the store.",
            discussion: """
            log-level: trace, debug, info, notice, warning, error or critical. name: what listrctl --peer selects \
            (listrd re-advertises itself under it; connected clients reconnect). item-limit: the most items the list \
            may hold, 1 to \(ListrSettings.maximumItemLimit), not below the number it holds. A wrong key or value is refused \
            and changes nothing.
            """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: ArgumentHelp("The setting.", valueName: "key"))
        var key: String

        @Argument(help: ArgumentHelp("Its new value.", valueName: "value"))
        var value: String

        func run() async throws {
            try await options.run { client throws(ListrCtlError) in
                client.print(message: try await client.message(for: SetSettingCommand(key: key, value: value)))
            }
        }
    }

    /// `listrctl config reset`.
    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "reset", abstract: "Put every setting back to its default.")

        @OptionGroup var options: ClientOptions

        func run() async throws {
            try await options.run { client throws(ListrCtlError) in
                client.print(message: try await client.message(for: ResetSettingsCommand()))
            }
        }
    }
}
