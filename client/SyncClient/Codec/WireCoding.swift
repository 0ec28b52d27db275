import ContractRuntime
import Foundation

/// Generated types ↔ their wire form as ``Contracts/JSONValue``.
enum WireCoding {
    struct Failure: Error {
        var reason: String
    }

    /// The wire object of a generated entity or event.
    static func object<Value: Encodable>(_ value: Value) throws(Failure) -> [String: JSONValue] {
        do {
            guard case .object(let fields) = try JSONValue(encoding: value) else {
                throw Failure(reason: "\(Value.self) does not encode as a JSON object")
            }
            return fields
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(reason: String(describing: error))
        }
    }

    /// A generated type from its wire object.
    static func decode<Value: Decodable>(_ type: Value.Type, from fields: [String: JSONValue]) throws(Failure) -> Value {
        do {
            return try JSONTreeDecoder.decode(Value.self, from: .object(fields))
        } catch let DecodingError.keyNotFound(key, _) {
            throw Failure(reason: "'\(key.stringValue)' is missing")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            throw Failure(reason: "'\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type")
        } catch let DecodingError.dataCorrupted(context) {
            throw Failure(reason: "'\(context.codingPath.map(\.stringValue).joined(separator: "."))': \(context.debugDescription)")
        } catch {
            throw Failure(reason: String(describing: error))
        }
    }
}
