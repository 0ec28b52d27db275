import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

/// `max_bytes` as the runtime applies it: a value's size as stored is checked on every write and
/// refused with a ``FieldValueError`` that says it is too large, never on reading or querying;
/// a row's size is the sum of its columns' (``RowSize``), for the contract's row limit.
@Suite("Byte limits", .blockingWork)
struct ByteLimitTests {
    private let codec = FieldCodec(ContractRegistry.self)

    private func error(_ value: JSONValue, _ field: FieldDescriptor, mode: FieldCodec.Mode = .write) -> FieldValueError? {
        do {
            _ = try codec.columnValue(value, for: field, mode: mode)
            return nil
        } catch {
            return error
        }
    }

    /// A JSON document whose canonical text takes `bytes` bytes.
    private func document(bytes: Int) -> JSONValue {
        let value = JSONValue.object(["text": .string(String(repeating: "x", count: bytes - #"{"text":""}"#.utf8.count))])
        precondition(ContractRuntime.CanonicalJSON.text(value).utf8.count == bytes)
        return value
    }

    @Test("a 300 KiB json value is refused by default, as too large; a raised max_bytes takes it")
    func jsonDefault() throws {
        let payload = FieldDescriptor(name: "payload", kind: .json)
        #expect(payload.maxBytes == FieldDescriptor.defaultMaximumBytes)
        let large = document(bytes: 300 * 1024)
        let refused = try #require(error(large, payload))
        #expect(refused.isTooLarge && refused.kind == .tooLarge)
        #expect(refused.message == "'payload' takes 307200 bytes, more than its limit of 256000")
        #expect(error(document(bytes: 256_000), payload) == nil, "exactly the limit fits")

        let raised = FieldDescriptor(name: "payload", kind: .json, maxBytes: 512_000)
        #expect(error(large, raised) == nil)
        #expect(error(document(bytes: 512_001), raised)?.isTooLarge == true)
    }

    @Test("reads and queries are not checked: a row the server sent, a filter's value")
    func readAndQuery() {
        let payload = FieldDescriptor(name: "payload", kind: .json, maxBytes: 10)
        let large = document(bytes: 100)
        #expect(error(large, payload, mode: .read) == nil)
        #expect(error(large, payload, mode: .query) == nil)
        #expect(error(large, payload, mode: .write)?.isTooLarge == true)
    }

    @Test("a string counts UTF-8 bytes, not characters")
    func utf8Bytes() throws {
        let name = FieldDescriptor(name: "name", kind: .string, isOptional: true, maxBytes: 10)
        #expect(error(.string(String(repeating: "é", count: 5)), name) == nil, "5 characters, 10 bytes")
        let six = try #require(error(.string(String(repeating: "é", count: 6)), name))
        #expect(six.isTooLarge && six.reason == "takes 12 bytes, more than its limit of 10")
        #expect(error(.string("🙂🙂🙂"), name)?.isTooLarge == true, "3 characters, 12 bytes")
        #expect(error(.null, name) == nil)
    }

    @Test("bytes count the decoded bytes, lists their canonical JSON text")
    func bytesAndLists() {
        let blob = FieldDescriptor(name: "blob", kind: .bytes, maxBytes: 3)
        #expect(error(.string(Data([1, 2, 3]).base64EncodedString()), blob) == nil, "4 characters of base64, 3 bytes")
        #expect(error(.string(Data([1, 2, 3, 4]).base64EncodedString()), blob)?.isTooLarge == true)

        let tags = FieldDescriptor(name: "tags", kind: .list(.string), maxBytes: 9)
        #expect(error(.array([.string("a"), .string("b")]), tags) == nil, #"["a","b"] is 9 bytes"#)
        #expect(error(.array([.string("a"), .string("bc")]), tags)?.isTooLarge == true)
    }

    @Test("other misfits are not too large")
    func otherErrors() {
        let payload = FieldDescriptor(name: "n", kind: .int)
        #expect(payload.maxBytes == nil)
        #expect(error(.string("x"), payload)?.kind == .invalid)
        let id = FieldDescriptor(name: "id", kind: .id)
        #expect(id.maxBytes == nil, "ids keep their own limit")
        #expect(error(.string(String(repeating: "i", count: FieldCodec.maximumIDBytes + 1)), id)?.isTooLarge == false)
    }

    @Test("the defaults: 256kB, raised by a max_length that allows more; none on local fields")
    func defaults() {
        #expect(FieldDescriptor(name: "s", kind: .string).maxBytes == 256_000)
        #expect(FieldDescriptor(name: "s", kind: .string, maxLength: 100).maxBytes == 256_000)
        #expect(FieldDescriptor(name: "s", kind: .string, maxLength: 100_000).maxBytes == 400_000)
        #expect(FieldDescriptor(name: "b", kind: .bytes, maxLength: 2_097_152).maxBytes == 2_097_152)
        #expect(FieldDescriptor(name: "l", kind: .list(.int), maxLength: 1_000_000).maxBytes == 256_000, "items say nothing of bytes")
        #expect(FieldDescriptor(name: "j", kind: .json, isLocal: true).maxBytes == nil)
        #expect(FieldDescriptor(name: "d", kind: .date).maxBytes == nil)
    }

    @Test("a row's stored size: text in UTF-8 bytes, blobs their length, 8 for numbers, 0 for null")
    func storedBytes() {
        #expect(ColumnValue.text("é").storedBytes == 2)
        #expect(ColumnValue.blob(Data(count: 5)).storedBytes == 5)
        #expect(ColumnValue.integer(1).storedBytes == 8)
        #expect(ColumnValue.real(0.5).storedBytes == 8)
        #expect(ColumnValue.null.storedBytes == 0)
        #expect(RowSize.storedBytes(of: [.text("ab"), .integer(3), .null, .blob(Data(count: 10))]) == 20)
        #expect(RowSize.storedBytes(of: [String: ColumnValue]().values) == 0)
    }

    @Test("a row over its contract's max_bytes is detected from its columns, each within its own limit")
    func rowTooLarge() throws {
        let fields = (1...5).map { FieldDescriptor(name: "part\($0)", kind: .json) }
        let entity = EntityDescriptor(
            name: "Thing", swiftName: "Thing", summary: "", table: "things", scope: "user", direction: .both,
            conflict: .lastWriterWins, tombstones: true, retentionSeconds: nil, priority: .normal, currentVersion: 1,
            oldestSupported: 1, primaryKey: "id", versionField: nil, fields: [FieldDescriptor(name: "id", kind: .id, isPrimaryKey: true)] + fields,
            localFields: [], relations: [], indexes: []
        )
        #expect(entity.maxBytes == RowSize.defaultMaximumBytes)
        var columns = [try codec.columnValue(.string("thing-1"), for: entity.fields[0])]
        for field in fields { columns.append(try codec.columnValue(document(bytes: 250_000), for: field)) }
        #expect(RowSize.storedBytes(of: columns) == 1_250_007)
        #expect(RowSize.storedBytes(of: columns) > entity.maxBytes)
        #expect(RowSize.storedBytes(of: columns.dropLast(2)) <= entity.maxBytes)
    }

    @Test("a row limit left out: 1MB, or twice the largest field limit, at most 4MB")
    func rowDefaults() {
        #expect(RowSize.defaultMaximumBytes(largestFieldBytes: 0) == 1_000_000)
        #expect(RowSize.defaultMaximumBytes(largestFieldBytes: 256_000) == 1_000_000)
        #expect(RowSize.defaultMaximumBytes(largestFieldBytes: 700_000) == 1_400_000)
        #expect(RowSize.defaultMaximumBytes(largestFieldBytes: 2_097_152) == 4_000_000)
        #expect(RowSize.defaultMaximumBytes(largestFieldBytes: .max) == 4_000_000)
        let event = EventDescriptor(
            name: "E", swiftName: "E", summary: "", table: "e", scope: "user", direction: .up, currentVersion: 1,
            oldestSupported: 1, appliesTo: nil, maxBytes: 3_000, fields: [FieldDescriptor(name: "j", kind: .json, maxBytes: 700_000)]
        )
        #expect(event.maxBytes == 3_000, "a written max_bytes is kept as it is")
    }

    @Test("the sample contracts: a 2 MiB photo keeps fitting, every other value has the defaults")
    func samples() throws {
        let issue = try #require(ContractRegistry.event(named: "IssueLogged"))
        #expect(issue.field(named: "photo")?.maxBytes == 2_097_152, "its max_length, in bytes")
        #expect(issue.maxBytes == 4_000_000)
        #expect(error(.string(Data(count: 2_097_152).base64EncodedString()), try #require(issue.field(named: "photo"))) == nil)
        #expect(ContractRegistry.assessment.field(named: "questions")?.maxBytes == 256_000)
        #expect(ContractRegistry.assessment.maxBytes == 1_000_000)
        #expect(ContractRegistry.assessment.maxRowBytes == 10_000_000, "the device's cache limit is another key")
        for entity in ContractRegistry.entities {
            #expect((1...RowSize.ceilingBytes).contains(entity.maxBytes), "\(entity.name)")
            // A file field's max_bytes is its file's size: the row holds only the reference.
            for field in entity.fields + entity.serverOnlyFields where field.kind != .file {
                if let bytes = field.maxBytes { #expect(bytes <= entity.maxBytes, "\(entity.name).\(field.name)") }
            }
        }
    }
}
