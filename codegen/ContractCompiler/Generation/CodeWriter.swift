import Foundation

/// Owns all generated text: indentation, line endings, and nothing else.
/// Every generator writes through one of these so output is uniform and byte-stable.
struct CodeWriter {
    private(set) var lines: [String] = []
    private var depth = 0
    private let indentUnit = "    "

    mutating func line(_ text: String = "") {
        lines.append(text.isEmpty ? "" : String(repeating: indentUnit, count: depth) + text)
    }

    /// Writes `header {`, the body one level deeper, then `}` (or `footer`).
    mutating func block(_ header: String, footer: String = "}", _ body: (inout CodeWriter) -> Void) {
        line(header + " {")
        depth += 1
        body(&self)
        depth -= 1
        line(footer)
    }

    /// A `///` doc comment, one line per line of `text`; nothing for empty text.
    mutating func doc(_ text: String?) {
        guard let text, !text.isEmpty else { return }
        for part in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            line(trimmed.isEmpty ? "///" : "/// " + trimmed)
        }
    }

    mutating func indent(_ body: (inout CodeWriter) -> Void) {
        depth += 1
        body(&self)
        depth -= 1
    }

    /// Lines verbatim (already indented text), each shifted by the current depth.
    mutating func raw(_ text: String) {
        for part in text.split(separator: "\n", omittingEmptySubsequences: false) {
            line(String(part))
        }
    }

    var text: String {
        var result = lines.joined(separator: "\n")
        while result.hasSuffix("\n") { result.removeLast() }
        return result + "\n"
    }
}

/// Swift literal spelling for generated code.
enum SwiftLiteral {
    /// A double-quoted Swift string literal with escapes.
    static func string(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    result += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }

    /// A raw multi-line string literal (`#"""` … `"""#`) holding `text` exactly.
    static func rawMultiline(_ text: String, indent: String) -> String {
        var hashes = "#"
        while text.contains("\"\"\"" + hashes) || text.contains("\"" + hashes) { hashes += "#" }
        let body = text.split(separator: "\n", omittingEmptySubsequences: false).map { indent + $0 }.joined(separator: "\n")
        return hashes + "\"\"\"\n" + body + "\n" + indent + "\"\"\"" + hashes
    }

    static func double(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) + ".0" }
        return "\(value)"
    }
}
