import HeapModule
import NIOCore

/// The deadlines of the pending requests, earliest first: what lets one timer fail every request
/// when its own deadline passes, instead of a timer per request.
///
/// A timer per request cost its caller an event-loop task scheduled and cancelled on every round
/// trip (about 7 % of a requester's CPU, profiled). With one timer, armed at the earliest deadline
/// (``PendingRequests``), a request whose deadline is later than the armed one, as each of a run
/// of requests with the same timeout is, costs one insertion into this heap and nothing when it
/// ends.
///
/// A request that ends (its reply, its cancellation, its peer's disconnection) is not looked for
/// in the heap: its entry stays until it reaches the top, where ``expired(at:isLive:)`` and
/// ``earliest(isLive:)`` drop it. So that such entries cannot pile up (one request that is never
/// answered holds the top while thousands behind it end), the heap is rebuilt from the live
/// requests whenever it holds more than twice as many entries as there are live ones, plus
/// ``slack``: its size stays within that bound at every moment, and each rebuild costs no more
/// than the insertions since the last one.
///
/// A value type with no clock and no I/O: the caller says what time it is and which requests are
/// still pending.
struct RequestDeadlines {
    private struct Item: Comparable {
        var deadline: NIODeadline
        var id: String

        static func < (lhs: Item, rhs: Item) -> Bool {
            lhs.deadline < rhs.deadline || (lhs.deadline == rhs.deadline && lhs.id < rhs.id)
        }
    }

    /// Entries of ended requests allowed beyond twice the live ones before a rebuild.
    static let slack = 16

    private var heap = Heap<Item>()

    /// How many entries the heap holds, live or not (for tests of its bound).
    var count: Int { heap.count }

    /// Adds the deadline of request `id`, one of `liveCount` pending requests. Returns true when
    /// the heap holds more than twice as many entries as that, plus ``slack``: the caller then
    /// ``rebuild(keeping:)``s it.
    mutating func add(_ id: String, deadline: NIODeadline, liveCount: Int) -> Bool {
        heap.insert(Item(deadline: deadline, id: id))
        return heap.count > 2 * liveCount + Self.slack
    }

    /// Keeps only the deadlines of the requests `isLive` names.
    mutating func rebuild(keeping isLive: (String) -> Bool) {
        heap = Heap(heap.unordered.filter { isLive($0.id) })
    }

    /// Removes and returns the live requests whose deadline is at or before `now`, earliest first.
    mutating func expired(at now: NIODeadline, isLive: (String) -> Bool) -> [String] {
        var expired: [String] = []
        while let top = heap.min, top.deadline <= now {
            heap.removeMin()
            if isLive(top.id) { expired.append(top.id) }
        }
        return expired
    }

    /// The earliest deadline of a live request, after dropping the ended ones ahead of it; nil
    /// when no live request has one.
    mutating func earliest(isLive: (String) -> Bool) -> NIODeadline? {
        while let top = heap.min {
            if isLive(top.id) { return top.deadline }
            heap.removeMin()
        }
        return nil
    }

    /// Forgets every deadline.
    mutating func removeAll() {
        heap = Heap()
    }
}
