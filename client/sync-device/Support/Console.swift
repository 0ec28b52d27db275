import ContractRuntime
import Contracts
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Everything the device prints goes through here: results on standard output, failures and
/// progress on standard error.
enum Console {
    /// One line on standard output.
    static func say(_ line: String = "") {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// A JSON document on standard output: keys sorted, two-space indents, so the shape is stable.
    static func json(_ value: JSONValue) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding a JSON tree cannot fail.
        let data = (try? encoder.encode(value)) ?? Data("null".utf8)
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    /// A note on standard error (never part of a command's result).
    static func note(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// `error: …` and `help: …` on standard error.
    static func fail(_ failure: DeviceFailure) {
        note("error: " + failure.message)
        if let hint = failure.hint { note("help: " + hint) }
    }

    /// Whether standard error is a terminal (progress bars are drawn only there).
    static var standardErrorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// Redraws the current line of standard error.
    static func redraw(_ line: String) {
        FileHandle.standardError.write(Data(("\r\u{1B}[2K" + line).utf8))
    }
}

/// How the device words times and sizes.
enum Wording {
    /// "just now", "3 min ago", "5 h ago", "15 days ago".
    static func age(of date: Date, now: Date) -> String {
        let seconds = Int(now.timeIntervalSince(date))
        if seconds < 0 { return "in the future (clock skew)" }
        if seconds < 60 { return "just now" }
        if seconds < 3600 { return "\(seconds / 60) min ago" }
        if seconds < 86_400 { return "\(seconds / 3600) h ago" }
        let days = seconds / 86_400
        return days == 1 ? "1 day ago" : "\(days) days ago"
    }

    /// "812 B", "14.2 kB", "3.1 MB".
    static func bytes(_ count: Int64) -> String {
        if count < 1000 { return "\(count) B" }
        let units = ["kB", "MB", "GB", "TB"]
        var value = Double(count) / 1000
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return String(format: "%.1f", value) + " " + units[unit]
    }

    /// "1 change", "3 changes".
    static func count(_ number: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(number) " + (number == 1 ? singular : plural ?? singular + "s")
    }

    /// A wire value as a person reads it: text without quotes, `—` for nothing.
    static func value(_ value: JSONValue?) -> String {
        switch value {
        case nil, .null?: return "—"
        case .string(let text)?: return text
        case let other?: return CanonicalJSON.text(other)
        }
    }
}

extension Date {
    /// ISO-8601 with milliseconds, as the wire writes timestamps.
    var iso8601: String { Timestamp(self).iso8601 }
}

extension Optional where Wrapped == Date {
    /// The ISO-8601 text, or JSON null.
    var json: JSONValue { map { .string($0.iso8601) } ?? .null }
}
