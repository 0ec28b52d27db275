/// One problem found in the contracts, located and explained.
///
/// Rendered as
/// ```
/// contracts/entities/unit.yaml:12:5: error[UNKNOWN_KEY]: unknown field key 'defualt'
///   help: did you mean 'default'?
/// ```
public struct Diagnostic: Hashable, Sendable {
    /// How serious a diagnostic is. Only errors fail a run.
    public enum Severity: String, Hashable, Sendable, Comparable {
        case error
        case warning

        private var rank: Int { self == .error ? 0 : 1 }
        /// Orders errors before warnings.
        public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs.rank < rhs.rank }
    }

    /// A secondary location that helps to understand the problem (for example the first definition of a duplicate).
    public struct Note: Hashable, Sendable {
        /// What the note says about its location.
        public var message: String
        /// The place the note points to, if any.
        public var location: SourceLocation?

        /// A note with its message and, optionally, where it points.
        public init(_ message: String, at location: SourceLocation? = nil) {
            self.message = message
            self.location = location
        }
    }

    /// Whether the diagnostic stops the run (an error) or not (a warning).
    public var severity: Severity
    /// The stable rule identifier, for example `UNKNOWN_KEY`.
    public var rule: RuleID
    /// What is wrong, in one sentence.
    public var message: String
    /// How to fix the problem.
    public var help: String?
    /// Where the problem is written.
    public var location: SourceLocation
    /// Secondary locations that explain the problem.
    public var notes: [Note]

    /// A diagnostic of the given severity and rule at a location.
    public init(
        _ severity: Severity,
        _ rule: RuleID,
        _ message: String,
        at location: SourceLocation,
        help: String? = nil,
        notes: [Note] = []
    ) {
        self.severity = severity
        self.rule = rule
        self.message = message
        self.help = help
        self.location = location
        self.notes = notes
    }

    /// The diagnostic in the compiler's text format.
    public var rendered: String {
        var text = "\(location): \(severity.rawValue)[\(rule.rawValue)]: \(message)"
        for note in notes {
            if let location = note.location {
                text += "\n  note: \(note.message) (\(location))"
            } else {
                text += "\n  note: \(note.message)"
            }
        }
        if let help {
            text += "\n  help: \(help)"
        }
        return text
    }
}

/// Gathers every diagnostic of a run; only errors stop it.
public struct DiagnosticCollector: Sendable {
    /// Every diagnostic emitted, in the order they came.
    public private(set) var diagnostics: [Diagnostic] = []

    /// An empty collector.
    public init() {}

    /// Whether any error was emitted.
    public var hasErrors: Bool { diagnostics.contains { $0.severity == .error } }
    /// How many errors were emitted.
    public var errorCount: Int { diagnostics.count { $0.severity == .error } }
    /// How many warnings were emitted.
    public var warningCount: Int { diagnostics.count { $0.severity == .warning } }

    /// Records one diagnostic.
    public mutating func emit(_ diagnostic: Diagnostic) {
        diagnostics.append(diagnostic)
    }

    /// Records an error of the given rule at a location.
    public mutating func error(
        _ rule: RuleID, _ message: String, at location: SourceLocation, help: String? = nil, notes: [Diagnostic.Note] = []
    ) {
        emit(Diagnostic(.error, rule, message, at: location, help: help, notes: notes))
    }

    /// Records a warning of the given rule at a location.
    public mutating func warning(
        _ rule: RuleID, _ message: String, at location: SourceLocation, help: String? = nil, notes: [Diagnostic.Note] = []
    ) {
        emit(Diagnostic(.warning, rule, message, at: location, help: help, notes: notes))
    }

    /// Records every diagnostic of another collector after this one's.
    public mutating func append(contentsOf other: DiagnosticCollector) {
        diagnostics.append(contentsOf: other.diagnostics)
    }

    /// Diagnostics in a stable order: by file, line, column, then rule and message.
    public var sorted: [Diagnostic] {
        diagnostics.enumerated().sorted { lhs, rhs in
            let (l, r) = (lhs.element, rhs.element)
            if l.location != r.location { return l.location < r.location }
            if l.rule != r.rule { return l.rule.rawValue < r.rule.rawValue }
            return lhs.offset < rhs.offset
        }.map(\.element)
    }

    /// Every diagnostic rendered, followed by a one-line summary.
    public func renderedReport() -> String {
        var lines = sorted.map(\.rendered)
        let errors = errorCount, warnings = warningCount
        if errors > 0 || warnings > 0 {
            lines.append(
                "\(errors) error\(errors == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s")"
            )
        }
        return lines.joined(separator: "\n")
    }
}
