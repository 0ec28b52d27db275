import ContractRuntime
package import Foundation
import GRDB
import SyncProtocol

/// A pull page read from the bytes the server sent straight into ``PreparedServerChanges``.
///
/// Each member of an entity row goes to its field's slot by position and becomes a column value
/// there through the same ``RowCodec`` checks as ``OfflineStore/prepare(_:)``, without the
/// dictionary per row that ``PullResponse/init(json:)`` builds and the store then reads back
/// field by field: on a first sync of 100 000 rows, building and tearing down those
/// dictionaries was most of the device's work. Rows of events, of contracts this build does
/// not know, and rows that do not fit their contract are read as ``JSONValue``s and handled
/// exactly as ``OfflineStore/prepare(_:)`` handles them.
package enum PullPageDecoder {
    /// A body that is not a pull page.
    package struct FormatError: Error, CustomStringConvertible {
        package var description: String
    }

    /// `cursor` and `has_more` of a page's body, found without reading its rows (the next page
    /// can be asked for before this one is read); `nil` when the body is not a pull page.
    package static func peek(_ body: Data) -> (cursor: String, hasMore: Bool)? {
        body.withUnsafeBytes { raw -> (cursor: String, hasMore: Bool)? in
            var parser = JSONParser.Parser(bytes: raw.bindMemory(to: UInt8.self))
            guard parser.consume(UInt8(ascii: "{")) else { return nil }
            var cursor: String?
            var hasMore: Bool?
            repeat {
                parser.skipWhitespace()
                guard let key = parser.string(), parser.consume(UInt8(ascii: ":")) else { return nil }
                switch key {
                case "cursor":
                    parser.skipWhitespace()
                    guard let text = parser.string() else { return nil }
                    cursor = text
                case "has_more":
                    guard case .bool(let flag)? = parser.value(depth: 1) else { return nil }
                    hasMore = flag
                default:
                    guard parser.skipValue(depth: 1) else { return nil }
                }
                if let cursor, let hasMore { return (cursor, hasMore) }
            } while parser.consume(UInt8(ascii: ","))
            return nil
        }
    }

    /// The whole page: its cursor, whether more follow, and its rows prepared for `scopeKey`.
    package static func decode(
        _ body: Data, scopeKey: String, store: OfflineStore
    ) throws(FormatError) -> (cursor: String, hasMore: Bool, changes: PreparedServerChanges) {
        let result: Result<(cursor: String, hasMore: Bool, changes: PreparedServerChanges), FormatError> = body.withUnsafeBytes { raw in
            var parser = JSONParser.Parser(bytes: raw.bindMemory(to: UInt8.self))
            do {
                let page = try readPage(&parser, scopeKey: scopeKey, store: store)
                parser.skipWhitespace()
                guard parser.index == parser.bytes.count else { throw FormatError(description: "text after the page") }
                return .success(page)
            } catch let error as FormatError {
                return .failure(error)
            } catch {
                return .failure(FormatError(description: String(describing: error)))
            }
        }
        return try result.get()
    }

    private static func readPage(
        _ parser: inout JSONParser.Parser, scopeKey: String, store: OfflineStore
    ) throws -> (cursor: String, hasMore: Bool, changes: PreparedServerChanges) {
        guard parser.consume(UInt8(ascii: "{")) else { throw FormatError(description: "the body is not a JSON object") }
        var cursor: String?
        var hasMore: Bool?
        var lastSeq = false
        var upserts: [(name: String, rows: PreparedServerChanges.Rows)]?
        var deletes: [String: [String]]?
        if !parser.consume(UInt8(ascii: "}")) {
            repeat {
                parser.skipWhitespace()
                guard let key = parser.string(), parser.consume(UInt8(ascii: ":")) else { throw FormatError(description: "a malformed member") }
                switch key {
                case "cursor":
                    guard case .string(let text)? = parser.value(depth: 1) else { throw FormatError(description: "'cursor' must be text") }
                    cursor = text
                case "has_more":
                    guard case .bool(let flag)? = parser.value(depth: 1) else { throw FormatError(description: "'has_more' must be true or false") }
                    hasMore = flag
                case "last_seq":
                    guard case .int? = parser.value(depth: 1) else { throw FormatError(description: "'last_seq' must be a whole number") }
                    lastSeq = true
                case "upserts":
                    upserts = try readUpserts(&parser, store: store)
                case "deletes":
                    deletes = try readDeletes(&parser)
                default:
                    guard parser.skipValue(depth: 1) else { throw FormatError(description: "a malformed value of '\(key)'") }
                }
            } while parser.consume(UInt8(ascii: ","))
            guard parser.consume(UInt8(ascii: "}")) else { throw FormatError(description: "the page object is not closed") }
        }
        guard let cursor else { throw FormatError(description: "'cursor' is missing") }
        guard let hasMore else { throw FormatError(description: "'has_more' is missing") }
        guard lastSeq else { throw FormatError(description: "'last_seq' is missing") }
        guard let upserts else { throw FormatError(description: "'upserts' is missing") }
        guard let deletes else { throw FormatError(description: "'deletes' is missing") }
        return (
            cursor, hasMore,
            PreparedServerChanges(upserts: upserts.sorted { $0.name < $1.name }, deletes: deletes, scopeKey: scopeKey, cursor: cursor)
        )
    }

    private static func readUpserts(_ parser: inout JSONParser.Parser, store: OfflineStore) throws -> [(
        name: String, rows: PreparedServerChanges.Rows
    )] {
        let malformed = FormatError(description: "'upserts' must be an object of arrays")
        guard parser.consume(UInt8(ascii: "{")) else { throw malformed }
        var upserts: [(name: String, rows: PreparedServerChanges.Rows)] = []
        if parser.consume(UInt8(ascii: "}")) { return upserts }
        repeat {
            parser.skipWhitespace()
            guard let name = parser.string(), parser.consume(UInt8(ascii: ":")) else { throw malformed }
            upserts.removeAll { $0.name == name }
            if let entity = store.contracts.entity(named: name) {
                upserts.append((name, try readEntityRows(&parser, entity, slots: RowSlots.of(entity), store: store)))
            } else {
                guard case .array(let rows)? = parser.value(depth: 1) else { throw malformed }
                upserts.append((name, store.prepareRows(name, rows, schemaVersion: nil)))
            }
        } while parser.consume(UInt8(ascii: ","))
        guard parser.consume(UInt8(ascii: "}")) else { throw malformed }
        return upserts
    }

    private static func readDeletes(_ parser: inout JSONParser.Parser) throws -> [String: [String]] {
        let malformed = FormatError(description: "'deletes' must be an object of arrays of text")
        guard case .object(let members)? = parser.value(depth: 1) else { throw malformed }
        var deletes: [String: [String]] = [:]
        for (contract, ids) in members {
            guard case .array(let ids) = ids else { throw malformed }
            deletes[contract] = try ids.map { id in
                guard case .string(let text) = id else { throw malformed }
                return text
            }
        }
        return deletes
    }

    /// An entity's array of rows, each read into its slots and prepared; after the first row
    /// that does not fit, the others are only stepped over (the page is refused whole).
    private static func readEntityRows(
        _ parser: inout JSONParser.Parser, _ entity: EntityDescriptor, slots layout: RowSlots, store: OfflineStore
    ) throws -> PreparedServerChanges.Rows {
        let malformed = FormatError(description: "'upserts' must be an object of arrays")
        guard parser.consume(UInt8(ascii: "[")) else { throw malformed }
        var rows: [PreparedServerRow] = []
        var refusal: OfflineStoreError?
        var count = 0
        if parser.consume(UInt8(ascii: "]")) { return .entity(entity, rows) }
        var slots = [JSONValue?](repeating: nil, count: layout.count)
        repeat {
            count += 1
            if refusal != nil {
                guard parser.skipValue(depth: 2) else { throw malformed }
                continue
            }
            guard parser.consume(UInt8(ascii: "{")) else {
                guard parser.skipValue(depth: 2) else { throw malformed }
                refusal = .invalidValue(contract: entity.name, field: "*", reason: "a row must be a JSON object")
                continue
            }
            for index in slots.indices { slots[index] = nil }
            try readMembers(&parser, into: &slots, layout: layout)
            do {
                rows.append(try store.prepareServerRow(entity, slots: slots, layout: layout, schemaVersion: entity.currentVersion))
            } catch {
                refusal = OfflineStore.map(error)
            }
        } while parser.consume(UInt8(ascii: ","))
        guard parser.consume(UInt8(ascii: "]")) else { throw malformed }
        if let refusal { return .invalid(refusal, count: count) }
        return .entity(entity, rows)
    }

    /// The members of a row object whose `{` was read, each value into its key's slot (a key
    /// appearing twice: the last one, as in a parsed object); keys with no slot are dropped.
    private static func readMembers(_ parser: inout JSONParser.Parser, into slots: inout [JSONValue?], layout: RowSlots) throws {
        let malformed = FormatError(description: "a malformed row")
        if parser.consume(UInt8(ascii: "}")) { return }
        var expected = 0
        repeat {
            let slot: Int?
            if let key = parser.plainString() {
                slot = layout.slot(forKey: key, expected: &expected)
            } else {
                parser.skipWhitespace()
                guard let key = parser.string() else { throw malformed }
                slot = layout.slot(named: key)
            }
            guard parser.consume(UInt8(ascii: ":")), let value = parser.value(depth: 3) else { throw malformed }
            if let slot { slots[slot] = value }
        } while parser.consume(UInt8(ascii: ","))
        guard parser.consume(UInt8(ascii: "}")) else { throw malformed }
    }
}
