import ArgumentParser
import ContractCompiler
import Foundation

/// Prints diagnostics to standard error and says whether the run may go on.
func report(_ diagnostics: DiagnosticCollector, format: DiagnosticFormat, rewriting prefix: (from: String, to: String)? = nil) {
    var text = format.render(diagnostics)
    if let prefix { text = text.replacingOccurrences(of: prefix.from, with: prefix.to) }
    guard !text.isEmpty else { return }
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
