import Logging
import Synchronization

/// The log level in effect, shared by every logger of the process, so that
/// `listrctl config set log-level debug` applies at once, without a restart.
final class LiveLogLevel: Sendable {
    private let level: Mutex<Logger.Level>

    init(_ level: Logger.Level) {
        self.level = Mutex(level)
    }

    /// The level in effect.
    var current: Logger.Level {
        get { level.withLock { $0 } }
        set { level.withLock { $0 = newValue } }
    }

    /// A swift-log handler writing to standard error whose level is this one.
    func handler(label: String) -> some LogHandler {
        LiveLevelLogHandler(stream: StreamLogHandler.standardError(label: label), level: self)
    }
}

/// `StreamLogHandler` with its level read from a ``LiveLogLevel`` at every message. Setting
/// `logLevel` on one logger sets it for the whole process, as `config set log-level` does.
private struct LiveLevelLogHandler: LogHandler {
    var stream: StreamLogHandler
    let level: LiveLogLevel

    var logLevel: Logger.Level {
        get { level.current }
        set { level.current = newValue }
    }

    var metadata: Logger.Metadata {
        get { stream.metadata }
        set { stream.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { stream[metadataKey: key] }
        set { stream[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        stream.log(event: event)
    }
}
