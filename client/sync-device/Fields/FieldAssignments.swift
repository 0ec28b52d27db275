import ContractRuntime
import Contracts
import Foundation
import SyncClient

/// `--field name=value` arguments, each parsed by the type its contract declares, into wire
/// values: `priority=high`, `tags=battery,urgent`, `due_on=2026-02-03`, `answer={"choice":0}`,
/// `latitude=52.52`, `opened_at=now`, `session_id=new`, `photo=@shot.jpg` (bytes inline, or a `file`
/// field's file imported into the store), `notes=null`.
struct FieldAssignments {
    let contract: String
    let fields: [FieldDescriptor]
    let clock: any DeviceClock
    /// The option the arguments came with, for messages: `--field`, `--where`.
    var option = "--field"
    /// Where `@FILE` values of `file` fields are imported; `nil` where files cannot be given
    /// (`--where`).
    var files: FileImports? = nil

    /// The wire values of `arguments`, by field name.
    /// - Throws: a usage failure naming the field for a malformed argument, an unknown field, a
    ///   field given twice or a value that does not fit the field's type.
    func parse(_ arguments: [String]) throws(DeviceFailure) -> [String: JSONValue] {
        var values: [String: JSONValue] = [:]
        // Files last: a file is copied into the store only once every other value parsed.
        let isFile = { (argument: String) in argument.contains("=@") }
        for argument in arguments.filter({ !isFile($0) }) + arguments.filter(isFile) {
            guard let equals = argument.firstIndex(of: "=") else {
                throw .usage("\(option) '\(argument)' is not name=value", hint: "for example \(option) \(example)")
            }
            let name = String(argument[..<equals])
            let text = String(argument[argument.index(after: equals)...])
            guard let field = fields.first(where: { $0.name == name }) else {
                let guess = SpellingSuggestion.closest(to: name, among: fields.map(\.name)).map { "did you mean '\($0)'? " } ?? ""
                throw .usage("\(contract) has no field '\(name)'", hint: guess + "its fields: " + fields.map(\.name).joined(separator: ", "))
            }
            guard values[name] == nil else { throw .usage("\(option) \(name) is given twice") }
            values[name] = try value(text, for: field)
        }
        return values
    }

    /// Fields without a value, a default or `?`, for a whole new row or event.
    private func missingRequired(in values: [String: JSONValue]) -> [FieldDescriptor] {
        fields.filter { values[$0.name] == nil && !$0.isOptional && $0.defaultValue == nil }
    }

    /// Refuses a whole new row or event that lacks a required field, naming every one missing
    /// with the type it expects.
    func requireAll(in values: [String: JSONValue]) throws(DeviceFailure) {
        let missing = missingRequired(in: values)
        guard missing.isEmpty else {
            throw .usage(
                "\(contract) needs " + missing.map { "--field \($0.name)=<\(Self.describe($0.kind))>" }.joined(separator: " "),
                hint: "its fields:\n" + fieldList
            )
        }
    }

    /// `team_id` set to the device's team when the contract has one, none is given and the
    /// device is in a single team.
    static func defaultingTeam(_ values: [String: JSONValue], fields: [FieldDescriptor], teams: [String]) -> [String: JSONValue] {
        guard values["team_id"] == nil, fields.contains(where: { $0.name == "team_id" }), teams.count == 1 else { return values }
        return values.merging(["team_id": .string(teams[0])]) { given, _ in given }
    }

    /// Refuses `--field` arguments naming the primary key or the version field, which the
    /// command or the server sets: `action` says what cannot be done (`edited`).
    static func refuseKeyAndVersion(
        in arguments: [String], of entity: EntityDescriptor, action: String, keyHint: String? = nil
    ) throws(DeviceFailure) {
        for argument in arguments {
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            guard let field = entity.field(named: name), field.isPrimaryKey || field.isVersionField else { continue }
            throw .usage(
                "\(entity.name).\(name) cannot be \(action): \(field.isPrimaryKey ? "it is the primary key" : "the server sets it")",
                hint: field.isPrimaryKey ? keyHint : nil
            )
        }
    }

    /// Every field with its type, one per line, for help and errors.
    var fieldList: String {
        fields.map { field in
            let presence = field.isOptional ? "optional" : field.defaultValue.map { "default \(Wording.value($0))" } ?? "required"
            return "  \(field.name): \(Self.describe(field.kind)) (\(presence))"
        }.joined(separator: "\n")
    }

    private var example: String {
        fields.first.map { "\($0.name)=…" } ?? "name=value"
    }

    // MARK: One value

    func value(_ text: String, for field: FieldDescriptor) throws(DeviceFailure) -> JSONValue {
        if text == "null" {
            guard field.isOptional else { throw bad(field, text, "it is required and cannot be null") }
            return .null
        }
        return try value(text, kind: field.kind, field: field)
    }

    private func value(_ text: String, kind: FieldKind, field: FieldDescriptor) throws(DeviceFailure) -> JSONValue {
        switch kind {
        case .id, .string, .ref:
            return .string(text)
        case .uuid:
            if text == "new" { return .string(UUID().uuidString.lowercased()) }
            guard let uuid = UUID(uuidString: text) else { throw bad(field, text, "expects a UUID (or `new`)") }
            return .string(uuid.uuidString.lowercased())
        case .int:
            guard let number = Int64(text) else { throw bad(field, text, "expects a whole number") }
            return .int(number)
        case .double:
            guard let number = Double(text), number.isFinite else { throw bad(field, text, "expects a number") }
            return .double(number)
        case .bool:
            switch text.lowercased() {
            case "true", "yes", "1": return .bool(true)
            case "false", "no", "0": return .bool(false)
            default: throw bad(field, text, "expects true or false")
            }
        case .timestamp:
            if text == "now" { return .string(Timestamp(clock.now()).iso8601) }
            guard let time = Timestamp(iso8601: text) else {
                throw bad(field, text, "expects an ISO-8601 time such as 2026-02-01T09:30:00Z (or `now`)")
            }
            return .string(time.iso8601)
        case .date:
            if text == "today" {
                return .string(CalendarDate(daysSince1970: Int(floor(clock.now().timeIntervalSince1970 / 86_400))).description)
            }
            guard let date = CalendarDate(text) else { throw bad(field, text, "expects a date such as 2026-02-01 (or `today`)") }
            return .string(date.description)
        case .json:
            guard let json = Self.json(text) else { throw bad(field, text, #"expects JSON, for example 0, "text" or {"a": 1}"#) }
            return json
        case .bytes:
            if text.hasPrefix("@") {
                let path = String(text.dropFirst())
                guard let data = FileManager.default.contents(atPath: path) else { throw bad(field, text, "cannot read the file \(path)") }
                return .string(data.base64EncodedString())
            }
            guard Data(base64Encoded: text) != nil else { throw bad(field, text, "expects base64, or @FILE to read a file") }
            return .string(text)
        case .file:
            // `@PATH`: the file itself, copied into the store (its limits checked) for the write
            // that names it; else a reference as JSON, of a file the server already holds.
            if text.hasPrefix("@") {
                guard let files else { throw bad(field, text, "a file cannot be given here") }
                let reference = try files.importFile(FileImports.Source(parsing: String(text.dropFirst())), contract: contract, field: field)
                return reference.json
            }
            guard let json = Self.json(text), (try? FileReference(json: json)) != nil else {
                throw bad(
                    field, text,
                    #"expects @FILE (a file to attach, `@shot.jpg;type=image/jpeg`) or a file reference {"sha256", "size", "content_type"}"#)
            }
            return json
        case .enumeration(let values, _):
            guard values.contains(text) else { throw bad(field, text, "expects one of " + values.joined(separator: ", ")) }
            return .string(text)
        case .list(let element):
            // A JSON array (for items with commas), or items separated by commas.
            let items: [String]
            if text.hasPrefix("["), case .array(let array)? = Self.json(text) {
                items = array.map { item in
                    if case .string(let text) = item { return text }
                    return CanonicalJSON.text(item)
                }
            } else {
                items =
                    text.isEmpty
                    ? []
                    : text.split(separator: ",", omittingEmptySubsequences: false).map {
                        $0.trimmingCharacters(in: .whitespaces)
                    }
            }
            var values: [JSONValue] = []
            for item in items { values.append(try value(item, kind: element, field: field)) }
            return .array(values)
        }
    }

    private func bad(_ field: FieldDescriptor, _ text: String, _ reason: String) -> DeviceFailure {
        .usage("\(contract).\(field.name) = '\(text)': \(reason)")
    }

    static func json(_ text: String) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    /// `int`, `enum (new | in_progress | …)`, `list<string>`, `timestamp`.
    static func describe(_ kind: FieldKind) -> String {
        switch kind {
        case .enumeration(let values, _): return "enum (" + values.joined(separator: " | ") + ")"
        case .list(let element): return "list<\(describe(element))>"
        default: return kind.spelling
        }
    }
}
