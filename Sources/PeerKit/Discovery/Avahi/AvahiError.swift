import CAvahi

/// Avahi's error codes as text.
enum AvahiError {
    /// Avahi's description of `code` (`avahi_strerror`), e.g. "Daemon not running" for -26.
    static func message(_ code: Int32) -> String {
        avahi_strerror(code).map { String(cString: $0) } ?? "Avahi error \(code)"
    }
}
