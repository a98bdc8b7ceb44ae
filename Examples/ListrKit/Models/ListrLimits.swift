/// Sizes the Listr tools agree on.
public enum ListrLimits {
    /// The largest message listrd and listrctl accept: 256 MiB.
    ///
    /// A dump or a replacement travels as one message holding the whole store as a Base64 XML
    /// property list, so PeerKit's default of 16 MiB would cap stores at about 11 MiB. 256 MiB
    /// leaves room for stores of about 190 MiB.
    public static let maximumMessageLength = 256 * 1024 * 1024
}
