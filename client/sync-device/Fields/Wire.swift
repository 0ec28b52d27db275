import ContractRuntime
import Contracts
import Foundation

/// Generated types ↔ their wire objects, for commands that work on any contract.
enum Wire {
    /// The wire object of a generated entity or event.
    static func object<Value: Encodable>(_ value: Value) -> [String: JSONValue] {
        guard case .object(let fields)? = try? JSONValue(encoding: value) else { return [:] }
        return fields
    }

    /// A generated type from its wire object.
    /// - Throws: a usage failure naming the contract and what does not fit.
    static func decode<Value: Decodable>(
        _ type: Value.Type, from fields: [String: JSONValue], contract: String
    ) throws(DeviceFailure)
        -> Value
    {
        do {
            return try JSONDecoder().decode(Value.self, from: JSONEncoder().encode(JSONValue.object(fields)))
        } catch let DecodingError.keyNotFound(key, _) {
            throw .usage("\(contract) needs --field \(key.stringValue)=…")
        } catch let DecodingError.dataCorrupted(context) {
            throw .usage("\(contract).\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)")
        } catch {
            throw .usage("\(contract): the values do not fit the contract (\(error))")
        }
    }
}
