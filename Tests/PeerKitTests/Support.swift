import Foundation
@testable import PeerKit

/// A random service type, so that tests running at the same time never see each other.
func randomServiceType() -> String {
    let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
    return "t" + String((0..<10).map { _ in alphabet.randomElement() ?? "x" })
}
