import Dispatch
import Foundation

/// Ctrl-C for commands that run until interrupted (`listrctl watch`): SIGINT ends the process
/// with status 0, after `cleanup` (e.g. restoring the terminal).
enum Interrupt {
    /// Installs the handler; keep the returned source alive as long as it should apply.
    static func exitOnSIGINT(cleanup: @escaping @Sendable () -> Void = {}) -> any DispatchSourceSignal {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler {
            cleanup()
            exit(0)
        }
        source.resume()
        return source
    }
}
