/// The version of this PeerKit package, in one place: every tool's `--version` prints it.
public enum PeerKitVersion {
    /// The package version, `MAJOR.MINOR.PATCH` (Semantic Versioning).
    public static let current = "0.2.0"
}
