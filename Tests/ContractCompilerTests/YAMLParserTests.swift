import ContractRuntime
import OutpostTestSupport
import Testing

@testable import ContractCompiler

@Suite("YAML through libyaml", .blockingWork)
struct YAMLParserTests {
    private func parse(_ text: String) -> (YAMLNode?, DiagnosticCollector) {
        var diagnostics = DiagnosticCollector()
        let node = YAMLParser().parse(Array(text.utf8), file: "x.yaml", diagnostics: &diagnostics)
        return (node, diagnostics)
    }

    @Test("mappings keep document order and every node its line and column")
    func locations() throws {
        let (node, diagnostics) = parse("b: 1\na:\n  - x\n  - { y: \"2\" }\n")
        #expect(!diagnostics.hasErrors)
        let entries = try #require(node?.mapping)
        #expect(entries.map(\.key.scalar) == ["b", "a"])
        #expect(entries[0].value.location == SourceLocation(file: "x.yaml", line: 1, column: 4))
        let items = try #require(entries[1].value.sequence)
        #expect(items[0].location == SourceLocation(file: "x.yaml", line: 3, column: 5))
        let inner = try #require(items[1].mapping)
        #expect(inner[0].value.content == .scalar("2", .quoted))
        #expect(inner[0].value.location == SourceLocation(file: "x.yaml", line: 4, column: 10))
    }

    @Test("a quoted scalar is not plain, so \"true\" stays text")
    func scalarStyles() throws {
        let (node, _) = parse("a: true\nb: \"true\"\nc: |\n  block\n")
        let entries = try #require(node?.mapping)
        #expect(entries[0].value.content == .scalar("true", .plain))
        #expect(entries[1].value.content == .scalar("true", .quoted))
        #expect(entries[2].value.content == .scalar("block\n", .block))
    }

    @Test("column counts characters, not bytes")
    func unicodeColumns() throws {
        let (node, _) = parse("é: ü\n")
        let entries = try #require(node?.mapping)
        #expect(entries[0].value.location.column == 4)
    }

    @Test(
        "refusals are located diagnostics",
        arguments: [
            ("a: &x 1\nb: *x\n", RuleID.yamlUnsupported, 1, 4),
            ("a: 1\n---\nb: 2\n", .yamlUnsupported, 2, 1),
            ("a: !!binary aGVsbG8=\n", .yamlUnsupported, 1, 4),
            ("a: [1, 2\n", .yamlSyntax, 2, 1),
            ("", .emptyFile, 1, 1),
            ("# only a comment\n", .emptyFile, 1, 1),
        ]
    )
    func refusals(text: String, rule: RuleID, line: Int, column: Int) {
        let (node, diagnostics) = parse(text)
        #expect(node == nil)
        #expect(diagnostics.diagnostics.map(\.rule) == [rule])
        #expect(diagnostics.diagnostics.first?.location == SourceLocation(file: "x.yaml", line: line, column: column))
    }

    @Test("deep nesting, NUL bytes, invalid UTF-8 and oversized files are refused without crashing")
    func hostileInput() {
        var diagnostics = DiagnosticCollector()
        let parser = YAMLParser()
        #expect(parser.parse(Array(("a: " + String(repeating: "[", count: 10_000)).utf8), file: "d.yaml", diagnostics: &diagnostics) == nil)
        #expect(parser.parse([0x61, 0x3A, 0x00], file: "n.yaml", diagnostics: &diagnostics) == nil)
        #expect(parser.parse([0x61, 0x3A, 0x20, 0xFF, 0xFE], file: "u.yaml", diagnostics: &diagnostics) == nil)
        #expect(parser.parse([UInt8](repeating: 0x61, count: parser.maximumFileSize + 1), file: "h.yaml", diagnostics: &diagnostics) == nil)
        #expect(diagnostics.diagnostics.map(\.rule) == [.nestingTooDeep, .fileUnreadable, .yamlSyntax, .fileTooLarge])
    }

    @Test("random bytes never crash the parser")
    func fuzz() {
        var generator = SplitMix64(seed: 42)
        let alphabet = Array("ab:{}[],-&*!|>'\"#\n\t  ?%@`~0.é".utf8)
        for _ in 0..<2_000 {
            let length = Int(generator.next() % 64)
            let bytes = (0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }
            var diagnostics = DiagnosticCollector()
            _ = YAMLParser().parse(bytes, file: "f.yaml", diagnostics: &diagnostics)
            for diagnostic in diagnostics.diagnostics {
                #expect(diagnostic.location.line >= 1 && diagnostic.location.column >= 1)
            }
        }
    }
}
