/// Seconds between two instants of the continuous clock.
extension ContinuousClock.Instant {
    /// The seconds from `earlier` to `self`.
    func seconds(since earlier: ContinuousClock.Instant) -> Double {
        let (seconds, attoseconds) = (self - earlier).components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
