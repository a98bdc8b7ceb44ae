import Dispatch

/// A serial executor on its own dispatch queue, for an actor whose methods block on file I/O
/// (`fsync` can take milliseconds): the blocking happens on this queue's thread, never on one of
/// the few threads of Swift's cooperative pool, which stay free for everything else.
final class StoreExecutor: SerialExecutor {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}
