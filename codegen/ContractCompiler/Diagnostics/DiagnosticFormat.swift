import Foundation

/// How diagnostics are printed.
public enum DiagnosticFormat: String, Sendable, CaseIterable {
    /// `file:line:col: error[RULE]: message` with `help:` lines, for people.
    case text
    /// One JSON document with every diagnostic, for tools.
    case json
    /// GitHub Actions workflow commands (`::error file=…,line=…`), for annotations on pull requests.
    case github

    /// The diagnostics of a run in this format (sorted, with the summary line for `text`).
    /// - Parameters:
    ///   - collector: the run's diagnostics.
    ///   - jsonMembers: more members of the `json` document after `diagnostics`, each a
    ///     name and its value as JSON text (the rollout gate's `fleet`); the other formats leave them out.
    public func render(_ collector: DiagnosticCollector, jsonMembers: [(name: String, json: String)] = []) -> String {
        switch self {
        case .text:
            return collector.renderedReport()
        case .github:
            return collector.sorted.map { diagnostic in
                let command = diagnostic.severity == .error ? "error" : "warning"
                var message = "[\(diagnostic.rule.rawValue)] \(diagnostic.message)"
                if let help = diagnostic.help { message += "\nhelp: \(help)" }
                let location = diagnostic.location
                return
                    "::\(command) file=\(Self.escapeProperty(location.file)),line=\(location.line),col=\(location.column),title=\(Self.escapeProperty(diagnostic.rule.rawValue))::\(Self.escapeData(message))"
            }.joined(separator: "\n")
        case .json:
            var entries: [String] = []
            for diagnostic in collector.sorted {
                var fields = [
                    "\"severity\":" + DefaultParser.quote(diagnostic.severity.rawValue),
                    "\"rule\":" + DefaultParser.quote(diagnostic.rule.rawValue),
                    "\"message\":" + DefaultParser.quote(diagnostic.message),
                    "\"file\":" + DefaultParser.quote(diagnostic.location.file),
                    "\"line\":\(diagnostic.location.line)",
                    "\"column\":\(diagnostic.location.column)",
                ]
                if let help = diagnostic.help { fields.append("\"help\":" + DefaultParser.quote(help)) }
                if !diagnostic.notes.isEmpty {
                    let notes = diagnostic.notes.map { note in
                        var parts = ["\"message\":" + DefaultParser.quote(note.message)]
                        if let location = note.location {
                            parts += [
                                "\"file\":" + DefaultParser.quote(location.file), "\"line\":\(location.line)",
                                "\"column\":\(location.column)",
                            ]
                        }
                        return "{" + parts.joined(separator: ",") + "}"
                    }
                    fields.append("\"notes\":[" + notes.joined(separator: ",") + "]")
                }
                entries.append("    {" + fields.joined(separator: ",") + "}")
            }
            let members = jsonMembers.map { ",\n  " + DefaultParser.quote($0.name) + ": " + $0.json }.joined()
            return "{\n  \"errors\": \(collector.errorCount),\n  \"warnings\": \(collector.warningCount),\n  \"diagnostics\": [\n"
                + entries.joined(separator: ",\n") + (entries.isEmpty ? "" : "\n") + "  ]" + members + "\n}"
        }
    }

    private static func escapeData(_ text: String) -> String {
        text.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "\r", with: "%0D")
            .replacingOccurrences(of: "\n", with: "%0A")
    }

    private static func escapeProperty(_ text: String) -> String {
        escapeData(text).replacingOccurrences(of: ":", with: "%3A").replacingOccurrences(of: ",", with: "%2C")
    }
}
