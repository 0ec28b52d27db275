package import Foundation
import SyncProtocol

/// A request body sent with `Content-Encoding: gzip`, inflated as the server does before
/// reading it (``Gzip/decompress(_:limit:)``, `Request.collectBody`). Properties: nothing
/// traps, refusals are ``Gzip/InflateFailure``s; a body that inflates within the limit inflates
/// to the same bytes with a limit of exactly their size and is refused as too large with one
/// byte less; what it inflates to compresses and inflates back to itself.
package func fuzzGzip(_ data: Data) throws(PropertyViolation) {
    let limit = 1 << 20
    let inflated: Data
    do {
        inflated = try Gzip.decompress(data, limit: limit)
    } catch {
        return
    }
    try check(inflated.count <= limit, "\(data.count) bytes inflate to \(inflated.count), over the limit of \(limit)")
    let exact = Result { () throws(Gzip.InflateFailure) in try Gzip.decompress(data, limit: inflated.count) }
    try check(exact == .success(inflated), "\(data.count) bytes do not inflate within a limit of their \(inflated.count) inflated bytes: \(exact)")
    if !inflated.isEmpty {
        let under = Result { () throws(Gzip.InflateFailure) in try Gzip.decompress(data, limit: inflated.count - 1) }
        try check(
            under == .failure(.tooLarge), "\(data.count) bytes inflating to \(inflated.count) are not too large for a limit one byte less: \(under)")
    }
    let again = Result { () throws(Gzip.InflateFailure) in try Gzip.decompress(Gzip.compress(inflated), limit: limit) }
    try check(again == .success(inflated), "\(inflated.count) inflated bytes do not survive compress and inflate: \(again)")
}
