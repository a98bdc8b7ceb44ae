/// Given-When-Then steps on top of Swift Testing: each runs its body and, when the body throws,
/// throws a ``ScenarioStepFailed`` that names the step, so a failing test says where it failed.
/// Use `#expect` inside them as usual; they are plain async functions, not a test framework.
///
/// ```swift
/// @Test("a message sent by alice reaches bob")
/// func chat() async throws {
///     let network = TestNetwork()
///     let (alice, bob) = try await given("alice and bob connected") { … }
///     try await when("alice sends a line") { try await alice.send(Line(text: "hi"), to: bobPeer) }
///     try await then("bob received it") { … }
/// }
/// ```
@discardableResult
public func given<T>(_ description: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
    try await step("Given", description, body)
}

/// The action of a scenario; see ``given(_:isolation:_:)``.
@discardableResult
public func when<T>(_ description: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
    try await step("When", description, body)
}

/// What must hold afterwards; see ``given(_:isolation:_:)``.
@discardableResult
public func then<T>(_ description: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
    try await step("Then", description, body)
}

private func step<T>(_ kind: String, _ description: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as ScenarioStepFailed {
        throw error
    } catch {
        throw ScenarioStepFailed(step: "\(kind) \(description)", error: error)
    }
}

/// A Given-When-Then step threw.
public struct ScenarioStepFailed: Error, CustomStringConvertible {
    /// The step, as in `"When alice sends a line"`.
    public let step: String
    /// What it threw.
    public let error: any Error

    /// "The step "When …" failed: " and the error.
    public var description: String { "The step \"\(step)\" failed: \(error)" }
}
