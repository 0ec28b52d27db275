import ContractRuntime
package import Foundation
import SyncProtocol

/// A `POST /sync/v1/push` body read as the server reads it (`Request.pushBody`): one bounded
/// pass over the bytes (``BoundedJSON``), then the push's shape (``PushRequest/init(json:)``).
/// Properties: nothing traps, refusals are the typed errors; a push that reads back is the
/// same push once written again, both as a device writes it (`JSONEncoder`) and in
/// canonical JSON.
package func fuzzPushBody(_ data: Data) throws(PropertyViolation) {
    let json: JSONValue
    do {
        json = try BoundedJSON.parse(data, maximumDepth: BoundedJSON.defaultMaximumDepth)
    } catch {
        return  // .malformed, .tooDeep or .nulCharacter: a 400
    }
    let push: PushRequest
    do {
        push = try PushRequest(json: json)
    } catch {
        try check(!error.message.isEmpty, "a refusal without a message")
        return
    }
    let deviceBody: Data
    do {
        deviceBody = try JSONEncoder().encode(push)
    } catch {
        throw PropertyViolation("a push the server read cannot be encoded again: \(error)")
    }
    try check(readPush(deviceBody) == push, "the push written by JSONEncoder reads back differently: \(push)")
    let canonical: Data
    do {
        canonical = try CanonicalJSON.encode(push)
    } catch {
        throw PropertyViolation("a push the server read has no canonical JSON: \(error)")
    }
    try check(readPush(canonical) == push, "the push in canonical JSON reads back differently: \(push)")
}

/// The push a body holds, as the server reads it; `nil` when refused.
private func readPush(_ data: Data) -> PushRequest? {
    guard let json = try? BoundedJSON.parse(data, maximumDepth: BoundedJSON.defaultMaximumDepth) else { return nil }
    return try? PushRequest(json: json)
}
