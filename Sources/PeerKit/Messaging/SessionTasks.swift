/// Work a session starts on behalf of its connections (an admission hook deciding on a peer, a
/// resource handler reading what a peer sends, a resource being sent), run
/// as child tasks of the session's structured ``TransceiverSession/run(callbacks:onStart:)``, so
/// that none outlives it: when the session stops, what is still running is cancelled and waited for.
final class SessionTasks: Sendable {
    typealias Job = @Sendable () async -> Void

    private let jobs: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation

    init() {
        (jobs, continuation) = AsyncStream.makeStream(of: Job.self)
    }

    /// Runs `job` as a child task of ``run()``. Returns false when the session has stopped
    /// (``finish()``): the job is not run.
    @discardableResult
    func start(_ job: @escaping Job) -> Bool {
        if case .terminated = continuation.yield(job) { return false }
        return true
    }

    /// No more jobs start; ``run()`` cancels the running ones and returns once they ended.
    func finish() {
        continuation.finish()
    }

    /// Runs every job started, each as a child task, until ``finish()``.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await job in jobs {
                group.addTask { await job() }
            }
            group.cancelAll()
        }
    }
}
