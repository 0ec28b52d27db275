import ContractRuntime
import Contracts
import Foundation

/// A parsed JSON document with the accessors tests need: `json["pushed"]["total"].int`.
struct JSON: CustomStringConvertible {
    let value: JSONValue?

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    init(_ value: JSONValue?) {
        self.value = value
    }

    init(parsing text: String, context: String) throws {
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        } catch {
            throw Malformed(description: "not JSON (\(error)) from \(context)")
        }
    }

    subscript(key: String) -> JSON {
        guard case .object(let object)? = value else { return JSON(nil) }
        return JSON(object[key])
    }

    subscript(index: Int) -> JSON {
        guard case .array(let array)? = value, array.indices.contains(index) else { return JSON(nil) }
        return JSON(array[index])
    }

    var string: String? {
        if case .string(let text)? = value { return text }
        return nil
    }

    var int: Int64? {
        switch value {
        case .int(let number)?: return number
        case .double(let number)? where number == number.rounded(): return Int64(number)
        default: return nil
        }
    }

    var double: Double? {
        switch value {
        case .int(let number)?: return Double(number)
        case .double(let number)?: return number
        default: return nil
        }
    }

    var bool: Bool? {
        if case .bool(let flag)? = value { return flag }
        return nil
    }

    var array: [JSON] {
        if case .array(let items)? = value { return items.map(JSON.init) }
        return []
    }

    var keys: [String] {
        if case .object(let object)? = value { return object.keys.sorted() }
        return []
    }

    var isNull: Bool { value == nil || value == .null }

    var description: String { value.map(CanonicalJSON.text) ?? "(missing)" }
}
