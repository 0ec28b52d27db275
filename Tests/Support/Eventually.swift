package import Testing

import struct Foundation.Date

/// Waits (polling, up to `seconds`: generous, for a loaded machine; it returns as soon as the
/// condition holds) until `condition` holds; records an issue when it never does.
package func eventually(
    _ what: String, within seconds: Double = 60, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: @Sendable () async throws -> Bool
) async rethrows {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    if try await condition() { return }
    Issue.record("timed out waiting until \(what)", sourceLocation: sourceLocation)
}
