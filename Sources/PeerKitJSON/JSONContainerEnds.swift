/// Where each object and array of one JSON text ends, recorded by ``JSONReader/skipValue(at:depth:)``
/// as it checks them, for ``JSONDocument``'s index of containers.
final class JSONContainerEnds {
    /// The offset just past each container's closing bracket, by the offset of its opening one.
    private(set) var ends: [Int: Int] = [:]

    func record(start: Int, end: Int) {
        ends[start] = end
    }
}
