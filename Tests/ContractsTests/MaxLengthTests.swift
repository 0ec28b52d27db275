import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import Testing

/// `max_length` as the registry carries it: characters for `id` and `string`, bytes for `bytes`,
/// items for `list<T>`, checked on every write (a device's, a push) and never on reading a row
/// the server sent. (String limits are also checked end to end by WriteTests and
/// PushValidationTests; these cover the byte and item counts.)
@Suite("max_length", .blockingWork)
struct MaxLengthTests {
    private let codec = FieldCodec(ContractRegistry.self)

    private func reason(_ value: JSONValue, _ field: FieldDescriptor, mode: FieldCodec.Mode) -> String? {
        do {
            _ = try codec.columnValue(value, for: field, mode: mode)
            return nil
        } catch {
            return error.reason
        }
    }

    @Test("a list: at most max_length items on a write; a longer one sent by the server still reads")
    func listItems() throws {
        let tags = try #require(ContractRegistry.unit.field(named: "tags"))
        #expect(tags.maxLength == 20)
        let twenty = JSONValue.array((1...20).map { .string("t\($0)") })
        let more = JSONValue.array((1...21).map { .string("t\($0)") })
        #expect(reason(twenty, tags, mode: .write) == nil)
        #expect(reason(more, tags, mode: .write) == "has more than 20 items")
        #expect(reason(more, tags, mode: .read) == nil)
    }

    @Test("bytes: at most max_length bytes of decoded data on a write, whatever the base64 text's length")
    func bytesLength() throws {
        let event = try #require(ContractRegistry.event(named: "IssueLogged"))
        let photo = try #require(event.fields.first { $0.name == "photo" })
        #expect(photo.maxLength == 2_097_152)
        let fits = JSONValue.string(Data(count: 2_097_152).base64EncodedString())
        let over = JSONValue.string(Data(count: 2_097_153).base64EncodedString())
        #expect(reason(fits, photo, mode: .write) == nil)
        #expect(reason(over, photo, mode: .write) == "is longer than 2097152 bytes")
        #expect(reason(over, photo, mode: .read) == nil)
    }

    @Test("a string counts characters, not UTF-8 bytes")
    func stringCharacters() throws {
        let title = try #require(ContractRegistry.unit.field(named: "title"))
        let limit = try #require(title.maxLength)
        #expect(reason(.string(String(repeating: "é", count: limit)), title, mode: .write) == nil)
        #expect(reason(.string(String(repeating: "é", count: limit + 1)), title, mode: .write) == "is longer than \(limit) characters")
    }
}
