import ListrKit
import Synchronization

/// Collects what an ``ItemStore`` reports, in order.
final class ChangeRecorder: Sendable {
    private let recorded = Mutex<[ListrChange]>([])

    /// Everything reported so far.
    var changes: [ListrChange] { recorded.withLock { $0 } }

    /// The closure to give the store.
    var record: @Sendable (ListrChange) -> Void {
        { change in self.recorded.withLock { $0.append(change) } }
    }
}
