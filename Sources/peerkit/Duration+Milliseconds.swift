extension Duration {
    /// The duration in milliseconds, with fractions.
    var milliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    /// "1.234 ms".
    static func format(milliseconds: Double) -> String {
        "\((milliseconds * 1000).rounded() / 1000) ms"
    }
}
