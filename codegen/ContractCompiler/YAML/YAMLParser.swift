import CYAML

/// Parses YAML text with the system libyaml into a ``YAMLNode`` tree.
///
/// Contracts are plain data, so the parser refuses what would make them hard to read or to
/// review: anchors and aliases, several documents in one file, non-string tags, and nesting
/// deeper than ``maximumDepth``. Every refusal is a diagnostic with the position libyaml gives.
public struct YAMLParser: Sendable {
    /// Files larger than this are refused before parsing.
    public var maximumFileSize: Int = 1 << 20
    /// Mappings and sequences nested deeper than this are refused.
    public var maximumDepth: Int = 32

    /// A parser with the default limits (1 MiB, depth 32).
    public init() {}

    /// Parses one file. Returns `nil` (with diagnostics) when it is not a usable document.
    public func parse(_ text: [UInt8], file: String, diagnostics: inout DiagnosticCollector) -> YAMLNode? {
        let start = SourceLocation.startOf(file)
        if text.count > maximumFileSize {
            diagnostics.error(
                .fileTooLarge,
                "file is larger than \(maximumFileSize) bytes, the limit for a contract file",
                at: start,
                help: "split the contract, or check that this is the file you meant to put in the contracts folder"
            )
            return nil
        }
        if let nul = text.firstIndex(of: 0) {
            diagnostics.error(
                .fileUnreadable,
                "file contains a NUL byte at offset \(nul); it looks binary, not YAML",
                at: location(ofOffset: nul, in: text, file: file),
                help: "contract files must be UTF-8 text"
            )
            return nil
        }
        var builder = TreeBuilder(file: file, maximumDepth: maximumDepth)
        return builder.run(text, diagnostics: &diagnostics)
    }

    private func location(ofOffset offset: Int, in text: [UInt8], file: String) -> SourceLocation {
        var line = 1, column = 1
        for byte in text[..<offset] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return SourceLocation(file: file, line: line, column: column)
    }
}

/// Walks libyaml's event stream and builds the node tree.
private struct TreeBuilder {
    let file: String
    let maximumDepth: Int

    private enum Frame {
        case sequence(start: SourceLocation, items: [YAMLNode])
        case mapping(start: SourceLocation, entries: [YAMLNode.Entry], pendingKey: YAMLNode?)
    }

    private var stack: [Frame] = []
    private var root: YAMLNode?
    private var documents = 0

    init(file: String, maximumDepth: Int) {
        self.file = file
        self.maximumDepth = maximumDepth
    }

    mutating func run(_ text: [UInt8], diagnostics: inout DiagnosticCollector) -> YAMLNode? {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else {
            diagnostics.error(.fileUnreadable, "libyaml could not be initialised", at: .startOf(file))
            return nil
        }
        defer { yaml_parser_delete(&parser) }

        return text.withUnsafeBufferPointer { buffer -> YAMLNode? in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            var event = yaml_event_t()
            while true {
                guard yaml_parser_parse(&parser, &event) == 1 else {
                    reportParserError(parser, diagnostics: &diagnostics)
                    return nil
                }
                defer { yaml_event_delete(&event) }
                let here = location(event.start_mark)
                switch event.type {
                case YAML_STREAM_END_EVENT:
                    if documents == 0 || root == nil {
                        diagnostics.error(
                            .emptyFile, "file is empty", at: .startOf(file),
                            help: "write a contract (`entity: Name` or `event: Name` with its keys), or delete the file"
                        )
                        return nil
                    }
                    return root
                case YAML_DOCUMENT_START_EVENT:
                    documents += 1
                    if documents > 1 {
                        diagnostics.error(
                            .yamlUnsupported, "a contract file holds exactly one YAML document", at: here,
                            help: "move the second document (after `---`) into a file of its own"
                        )
                        return nil
                    }
                case YAML_ALIAS_EVENT:
                    diagnostics.error(
                        .yamlUnsupported, "aliases (`*name`) are not supported in contracts", at: here,
                        help: "write the value out in full; each contract should read on its own"
                    )
                    return nil
                case YAML_SCALAR_EVENT:
                    guard refuseAnchorOrTag(event.data.scalar.anchor, event.data.scalar.tag, at: here, &diagnostics) else {
                        return nil
                    }
                    let scalar = event.data.scalar
                    let text = String(
                        decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self
                    )
                    let style: YAMLNode.ScalarStyle
                    switch scalar.style {
                    case YAML_PLAIN_SCALAR_STYLE: style = .plain
                    case YAML_LITERAL_SCALAR_STYLE, YAML_FOLDED_SCALAR_STYLE: style = .block
                    default: style = .quoted
                    }
                    add(YAMLNode(.scalar(text, style), at: here))
                case YAML_SEQUENCE_START_EVENT:
                    guard refuseAnchorOrTag(event.data.sequence_start.anchor, event.data.sequence_start.tag, at: here, &diagnostics),
                        checkDepth(at: here, &diagnostics)
                    else { return nil }
                    stack.append(.sequence(start: here, items: []))
                case YAML_MAPPING_START_EVENT:
                    guard refuseAnchorOrTag(event.data.mapping_start.anchor, event.data.mapping_start.tag, at: here, &diagnostics),
                        checkDepth(at: here, &diagnostics)
                    else { return nil }
                    stack.append(.mapping(start: here, entries: [], pendingKey: nil))
                case YAML_SEQUENCE_END_EVENT:
                    if case .sequence(let start, let items) = stack.popLast() {
                        add(YAMLNode(.sequence(items), at: start))
                    }
                case YAML_MAPPING_END_EVENT:
                    if case .mapping(let start, let entries, _) = stack.popLast() {
                        add(YAMLNode(.mapping(entries), at: start))
                    }
                default:
                    break
                }
            }
        }
    }

    private mutating func add(_ node: YAMLNode) {
        guard let top = stack.popLast() else {
            root = node
            return
        }
        switch top {
        case .sequence(let start, var items):
            items.append(node)
            stack.append(.sequence(start: start, items: items))
        case .mapping(let start, var entries, let pendingKey):
            if let key = pendingKey {
                entries.append(YAMLNode.Entry(key: key, value: node))
                stack.append(.mapping(start: start, entries: entries, pendingKey: nil))
            } else {
                stack.append(.mapping(start: start, entries: entries, pendingKey: node))
            }
        }
    }

    private func checkDepth(at location: SourceLocation, _ diagnostics: inout DiagnosticCollector) -> Bool {
        guard stack.count >= maximumDepth else { return true }
        diagnostics.error(
            .nestingTooDeep, "nesting deeper than \(maximumDepth) levels", at: location,
            help: "contracts need a few levels at most; check the indentation of this block"
        )
        return false
    }

    private func refuseAnchorOrTag(
        _ anchor: UnsafeMutablePointer<yaml_char_t>?, _ tag: UnsafeMutablePointer<yaml_char_t>?,
        at location: SourceLocation, _ diagnostics: inout DiagnosticCollector
    ) -> Bool {
        if let anchor {
            let name = String(cString: anchor)
            diagnostics.error(
                .yamlUnsupported, "anchors (`&\(name)`) are not supported in contracts", at: location,
                help: "remove the anchor and write values out in full; each contract should read on its own"
            )
            return false
        }
        if let tag {
            let name = String(cString: tag)
            if name != "tag:yaml.org,2002:str" {
                diagnostics.error(
                    .yamlUnsupported, "YAML tags (`\(name)`) are not supported in contracts", at: location,
                    help: "remove the tag; the contract language gives every key its type"
                )
                return false
            }
        }
        return true
    }

    private func reportParserError(_ parser: yaml_parser_t, diagnostics: inout DiagnosticCollector) {
        let problem = parser.problem.map { String(cString: $0) } ?? "malformed YAML"
        let context = parser.context.map { String(cString: $0) }
        let mark = parser.problem_mark
        var notes: [Diagnostic.Note] = []
        if let context {
            notes.append(.init(context, at: location(parser.context_mark)))
        }
        let help: String
        if parser.error == YAML_READER_ERROR {
            help = "contract files must be UTF-8 text"
        } else if context == "while scanning an alias" {
            // A bare `*` starts an alias, as in a file field's unquoted `content_types: [*/*]`.
            help = "quote a value that starts with `*`, such as the content type `\"*/*\"`"
        } else {
            help = "fix the YAML syntax at this position (indentation, a missing `:`, or an unclosed quote or bracket)"
        }
        diagnostics.error(.yamlSyntax, problem, at: location(mark), help: help, notes: notes)
    }

    private func location(_ mark: yaml_mark_t) -> SourceLocation {
        SourceLocation(file: file, line: Int(mark.line) + 1, column: Int(mark.column) + 1)
    }
}
