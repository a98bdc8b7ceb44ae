import NIOCore

/// A Swift task executor that runs jobs on one SwiftNIO event loop.
///
/// Give it to a transceiver as its ``PeerConfiguration/handlerExecutor``, together with an
/// ``PeerConfiguration/eventLoopGroup`` of that one loop, and run the tasks that make requests
/// on it too; then a request and its reply cross no thread:
///
/// ```swift
/// let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
/// let executor = EventLoopTaskExecutor(loops.any())
/// var configuration = PeerConfiguration(serviceType: "chat")
/// configuration.eventLoopGroup = loops
/// configuration.handlerExecutor = executor     // handlers run where requests are read
/// let transceiver = PeerTransceiver(configuration: configuration)
///
/// try await withTaskExecutorPreference(executor) {  // and replies are awaited there
///     let reply = try await transceiver.request(ping, to: peer, expecting: Pong.self)
/// }
/// ```
///
/// By default a handler runs on Swift's global concurrent executor and a request's caller
/// wherever its task runs: a request then wakes four threads (the caller's hands the frame to
/// the loop, the peer's loop hands it to a handler, the reply goes back to that loop, and the
/// caller's loop resumes the caller), each wake-up a few microseconds. On one loop, the frame is
/// written, read, handled and answered without a wake-up but the socket's own.
///
/// **The cost: the loop is shared.** Everything on the loop waits while a job of the executor
/// runs. A handler that blocks (a lock held long, synchronous file or database I/O, a sleep)
/// holds up every connection of the loop, their heartbeats included: a handler that blocks for
/// longer than the peers' ``PeerConfiguration/peerTimeout`` gets this transceiver disconnected
/// from all of them. Use it for handlers that answer from memory in microseconds; leave the
/// default for the rest.
///
/// Shut the loop down only once the transceiver has stopped (``PeerTransceiver/run()`` returned):
/// a job enqueued on a loop that is shut down never runs, so its task would never resume.
public final class EventLoopTaskExecutor: TaskExecutor {
    /// The loop that runs the jobs.
    public let eventLoop: any EventLoop

    /// An executor that runs its jobs on `eventLoop`, in the order they are enqueued.
    public init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Runs `job` on the loop: at once after the loop's current work when called on the loop
    /// (no wake-up), otherwise once the loop wakes.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
