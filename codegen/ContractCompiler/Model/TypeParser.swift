import Foundation

/// Parses type spellings (`string?`, `list<int>`, `ref<Unit>`) into ``TypeReference``.
enum TypeParser {
    enum Failure: Error, Equatable {
        case unknown(String)
        case nestedList
        case listOfNonScalar(String)
        case malformed
    }

    static func parse(_ text: String) -> Result<TypeReference, Failure> {
        var spelling = text.trimmingCharacters(in: .whitespaces)
        var optional = false
        if spelling.hasSuffix("?") {
            optional = true
            spelling.removeLast()
            spelling = spelling.trimmingCharacters(in: .whitespaces)
        }
        return parseType(spelling, allowList: true).map { TypeReference($0, optional: optional) }
    }

    private static func parseType(_ spelling: String, allowList: Bool) -> Result<FieldType, Failure> {
        if let inner = generic("list", spelling) {
            guard allowList else { return .failure(.nestedList) }
            switch parseType(inner, allowList: false) {
            case .success(let element):
                switch element {
                case .json, .bytes, .file: return .failure(.listOfNonScalar(element.spelling))
                default: return .success(.list(element))
                }
            case .failure(let failure): return .failure(failure)
            }
        }
        if let inner = generic("ref", spelling) {
            guard !inner.isEmpty, !inner.contains("<") else { return .failure(.malformed) }
            return .success(.ref(inner))
        }
        switch spelling {
        case "id": return .success(.id)
        case "string": return .success(.string)
        case "int": return .success(.int)
        case "double": return .success(.double)
        case "bool": return .success(.bool)
        case "timestamp": return .success(.timestamp)
        case "date": return .success(.date)
        case "uuid": return .success(.uuid)
        case "json": return .success(.json)
        case "bytes": return .success(.bytes)
        case "file": return .success(.file)
        case "enum": return .success(.enumeration(values: [], fallback: nil))
        default:
            if spelling.contains("<") || spelling.contains(">") || spelling.contains("?") {
                return .failure(.malformed)
            }
            return .failure(.unknown(spelling))
        }
    }

    private static func generic(_ name: String, _ spelling: String) -> String? {
        guard spelling.hasPrefix(name + "<"), spelling.hasSuffix(">") else { return nil }
        return String(spelling.dropFirst(name.count + 1).dropLast()).trimmingCharacters(in: .whitespaces)
    }

    /// Every spelling a schema author might have meant, for "did you mean".
    static let knownSpellings = FieldType.scalarNames + ["list<T>", "ref<Entity>"]
}
