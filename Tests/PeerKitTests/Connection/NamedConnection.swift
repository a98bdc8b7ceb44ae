/// A connection for the state machines' tests without I/O: an object (they compare connections
/// by identity) with a name to print.
final class NamedConnection: CustomStringConvertible {
    let name: String

    init(_ name: String) {
        self.name = name
    }

    var description: String { name }
}
