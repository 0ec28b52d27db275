import ArgumentParser
import ContractCompiler
import Foundation

/// Prints diagnostics to standard error; `jsonMembers` go into the `json` document after them.
func report(
    _ diagnostics: DiagnosticCollector, format: DiagnosticFormat, rewriting prefix: (from: String, to: String)? = nil,
    jsonMembers: [(name: String, json: String)] = []
) {
    var text = format.render(diagnostics, jsonMembers: jsonMembers)
    if let prefix { text = text.replacingOccurrences(of: prefix.from, with: prefix.to) }
    guard !text.isEmpty else { return }
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
