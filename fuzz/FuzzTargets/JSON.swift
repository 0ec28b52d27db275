import ContractRuntime
package import Foundation

/// JSON text read by the runtime's one-pass parser (``JSONParser``): `json` and `list`
/// columns, whole pull pages on a device, and (bounded, ``BoundedJSON``) request bodies on the
/// server. Properties: nothing traps; a value read is written by ``CanonicalJSON`` into text
/// that reads back to the same value, which is its own canonical text; the bounded reader
/// with the same depth reads the same value, or refuses it only for U+0000.
package func fuzzJSON(_ data: Data) throws(PropertyViolation) {
    let value = JSONParser.parse(data)
    let bounded: Result<JSONValue, BoundedJSON.Refusal> = Result { () throws(BoundedJSON.Refusal) in
        try BoundedJSON.parse(data, maximumDepth: 512)
    }
    guard let value else {
        if case .success(let other) = bounded {
            throw PropertyViolation("BoundedJSON reads \(other) where JSONParser reads nothing")
        }
        return
    }
    switch bounded {
    case .success(let other):
        try check(other == value, "BoundedJSON reads \(other) where JSONParser reads \(value)")
    case .failure(.nulCharacter):
        break
    case .failure(let refusal):
        throw PropertyViolation("BoundedJSON refuses (\(refusal)) what JSONParser reads: \(value)")
    }
    let canonical = CanonicalJSON.bytes(value)
    guard let again = JSONParser.parse(Data(canonical)) else {
        throw PropertyViolation("the canonical text of \(value) does not read back: \(String(decoding: canonical, as: UTF8.self))")
    }
    try check(again == value, "\(value) reads back from its canonical text as \(again)")
    try check(CanonicalJSON.bytes(again) == canonical, "the canonical text of \(value) is not stable")
}
