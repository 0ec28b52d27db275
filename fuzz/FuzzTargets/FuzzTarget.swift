package import Foundation

/// A property a fuzz target checks that did not hold for an input: the harness traps on it (so
/// libFuzzer keeps the input), the regression tests record it as an issue.
package struct PropertyViolation: Error, CustomStringConvertible {
    package var description: String

    package init(_ description: String) {
        self.description = description
    }
}

/// Throws a ``PropertyViolation`` saying `message` unless `condition` holds.
func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(PropertyViolation) {
    if !condition { throw PropertyViolation(message()) }
}

/// Every parser of bytes from outside that is fuzzed, by the name its harness
/// (`fuzz/harnesses/fuzz-<name>`), seed corpus (`fuzz/corpus/<name>`) and regressions
/// (`fuzz/regressions/<name>`) go by.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// A contract file (YAML) read, decoded and validated as `contractc` does (``fuzzContract(_:)``).
    case contract
    /// A contract file in place of its namesake among the sample contracts, checked against
    /// `contracts.lock` and generated (``fuzzContractSet(_:)``).
    case contractSet = "contract-set"
    /// A `POST /sync/v1/push` body as the server reads it (``fuzzPushBody(_:)``).
    case push
    /// A request body sent with `Content-Encoding: gzip` (``fuzzGzip(_:)``).
    case gzip
    /// JSON text read by the runtime's one-pass parser (``fuzzJSON(_:)``).
    case json
    /// A pull page as a device reads it (``fuzzPullPage(_:)``).
    case pullPage = "pull-page"
    /// A pull cursor sent back by a device (``fuzzCursor(_:)``).
    case cursor
    /// The `X-Outpost-Schema` header (``fuzzSchemaHeader(_:)``).
    case schemaHeader = "schema-header"
    /// A bearer token (``fuzzToken(_:)``).
    case token
    /// An asset request's `Range` header (``fuzzRange(_:)``).
    case range

    /// Runs the target on one input; the token target's verification is awaited here, on the
    /// caller's executor (the harness bridges it with ``fuzzToken(_:)`` instead).
    package func run(_ data: Data) async throws(PropertyViolation) {
        switch self {
        case .contract: try fuzzContract(data)
        case .contractSet: try fuzzContractSet(data)
        case .push: try fuzzPushBody(data)
        case .gzip: try fuzzGzip(data)
        case .json: try fuzzJSON(data)
        case .pullPage: try fuzzPullPage(data)
        case .cursor: try fuzzCursor(data)
        case .schemaHeader: try fuzzSchemaHeader(data)
        case .token: try await verifyToken(data)
        case .range: try fuzzRange(data)
        }
    }
}
