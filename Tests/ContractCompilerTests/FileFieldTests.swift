import ContractRuntime
import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// The `file` field type: what it accepts, the diagnostic for each misuse (at its file, line and
/// column), what it generates, and its place in the lock. Narrowing and widening a file field
/// are in CompatibilityCaseTable (`files`); every diagnostic together is the `file-fields`
/// invalid fixture.
@Suite("File fields", .blockingWork)
struct FileFieldTests {
    /// An entity with `fields` after its key (line 8), and `top` lines after its sync line.
    private func entity(_ fields: [String], top: [String] = [], local: [String] = []) -> String {
        var lines =
            [
                "entity: Thing", "summary: A thing.", "version: 1", "table: things", "scope: user",
                "sync: { direction: both, conflict: last_writer_wins }",
            ] + top + ["fields:", "  id: { type: id, primary_key: true }"] + fields.map { "  " + $0 }
        if !local.isEmpty { lines += ["local:"] + local.map { "  " + $0 } }
        return lines.joined(separator: "\n") + "\n"
    }

    private static let photo = "photo: { type: file?, max_bytes: 10MB, content_types: [image/jpeg, \"image/*\"] }"

    // MARK: What it accepts

    @Test("a file field reads its size limit and content types; optional or not, on an entity or an event")
    func reads() throws {
        let set = try compileValid([
            "entities/thing.yaml": entity([Self.photo, "scan: { type: file, max_bytes: 2GB, content_types: [\"*/*\"], encrypted: true }"]),
            "events/thing_scanned.yaml": """
            event: ThingScanned
            summary: A thing was scanned.
            version: 1
            scope: user
            fields:
              page: { type: file, max_bytes: 500kB, content_types: [application/pdf] }
            """,
        ])
        let thing = try #require(set.contract(named: "Thing"))
        let photo = try #require(thing.field(named: "photo"))
        #expect(photo.type == TypeReference(.file, optional: true))
        #expect(photo.maxBytes == 10_000_000 && photo.effectiveMaxBytes == 10_000_000)
        #expect(photo.contentTypes == ["image/jpeg", "image/*"])
        let scan = try #require(thing.field(named: "scan"))
        #expect(scan.maxBytes == 2_000_000_000 && scan.isEncrypted && !scan.type.isOptional && scan.contentTypes == ["*/*"])
        let page = try #require(set.contract(named: "ThingScanned")?.field(named: "page"))
        #expect(page.contentTypes == ["application/pdf"] && page.maxBytes == 500_000)
    }

    @Test("a file's limit is the file's, not the row's: no row limit it passes, no larger default row limit")
    func fileLimitIsNotTheRows() throws {
        let plain = try compiledThing(entity([Self.photo]))
        #expect(plain.effectiveMaxBytes == RowSize.defaultMaximumBytes, "a 10MB file leaves the row at 1MB")
        #expect(plain.field(named: "photo")?.storedMaxBytes == nil)
        let small = try compiledThing(entity([Self.photo], top: ["max_bytes: 2kB"]))
        #expect(small.effectiveMaxBytes == 2_000, "a row limit below the file's limit is no MAX_BYTES_ABOVE_ROW_LIMIT")
    }

    @Test(
        "content type patterns: type/subtype, type/* or */*, lowercase, without parameters",
        arguments: [
            ("image/png", true), ("image/*", true), ("*/*", true), ("application/vnd.ms-excel", true), ("text/x-c++", true),
            ("Image/png", false), ("image/PNG", false), ("image", false), ("image/", false), ("/png", false), ("*/png", false),
            ("im*/*", false), ("image/p*", false), ("text/plain; charset=utf-8", false), ("image/png ", false), ("*", false),
        ])
    func contentTypePatterns(pattern: String, valid: Bool) {
        #expect(ContractDecoder.isContentTypePattern(pattern) == valid)
    }

    // MARK: Diagnostics, each at its place

    @Test(
        "a file field without its size limit or its content types says which key is missing",
        arguments: [
            (
                "photo: { type: file, content_types: [image/png] }", 9, 3,
                "MISSING_KEY]: file field 'photo' is missing the required key 'max_bytes'",
                "give the most bytes a file may have, for example `max_bytes: 10MB`"
            ),
            (
                "photo: { type: file?, max_bytes: 1MB }", 9, 3, "MISSING_KEY]: file field 'photo' is missing the required key 'content_types'",
                "list what it accepts, for example `content_types: [image/jpeg, image/png]` (or `[\"*/*\"]` for any file)"
            ),
            (
                "photo: { type: file?, max_bytes: 1MB, content_types: [] }", 9, 56,
                "MISSING_KEY]: file field 'photo' accepts no content type: `content_types` is empty",
                "list what it accepts, for example `content_types: [image/jpeg, image/png]` (or `[\"*/*\"]` for any file)"
            ),
            (
                "photo: file?", 9, 10, "MISSING_KEY]: file field 'photo' is missing the required keys 'max_bytes' and 'content_types'",
                "write `photo: { type: file?, max_bytes: 10MB, content_types: [image/jpeg, image/png] }`"
            ),
            (
                "photo: { type: file?, max_bytes: 1MB, content_types: image/png }", 9, 56,
                "UNEXPECTED_NODE]: `content_types` must be a list, found a scalar", "write `content_types: [image/png]`"
            ),
        ])
    func missingKeys(field: String, line: Int, column: Int, message: String, help: String) throws {
        #expect(
            try folderReport(entity([field])) == """
                contracts/entities/thing.yaml:\(line):\(column): error[\(message)
                  help: \(help)
                1 error, 0 warnings
                """)
    }

    @Test(
        "a content type that is not a pattern is INVALID_CONTENT_TYPE at the value, with the spelling meant when there is one",
        arguments: [
            ("Image/PNG", "did you mean 'image/png'? (content types are lowercase, without parameters)"),
            ("\"text/plain; charset=utf-8\"", "did you mean 'text/plain'? (content types are lowercase, without parameters)"),
            ("image", "write `type/subtype` (`image/png`), `type/*` (`image/*`) or `\"*/*\"`, in lowercase"),
            ("\"*/png\"", "write `type/subtype` (`image/png`), `type/*` (`image/*`) or `\"*/*\"`, in lowercase"),
        ])
    func invalidContentType(written: String, help: String) throws {
        let shown = written.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        #expect(
            try folderReport(entity(["photo: { type: file?, max_bytes: 1MB, content_types: [image/png, \(written)] }"])) == """
                contracts/entities/thing.yaml:9:68: error[INVALID_CONTENT_TYPE]: '\(shown)' is not a content type
                  help: \(help)
                1 error, 0 warnings
                """)
    }

    @Test("a content type listed twice is DUPLICATE_CONTENT_TYPE at the second, naming the first")
    func duplicateContentType() throws {
        #expect(
            try folderReport(entity(["photo: { type: file?, max_bytes: 1MB, content_types: [image/png, \"image/*\", image/png] }"])) == """
                contracts/entities/thing.yaml:9:79: error[DUPLICATE_CONTENT_TYPE]: content type 'image/png' is listed twice
                  note: first listed here (contracts/entities/thing.yaml:9:57)
                  help: remove the second 'image/png'
                1 error, 0 warnings
                """)
    }

    @Test("an unquoted */* is YAML's alias: the help says to quote it")
    func unquotedAnything() throws {
        let report = try folderReport(entity(["photo: { type: file?, max_bytes: 1MB, content_types: [*/*] }"]))
        #expect(report.hasPrefix("contracts/entities/thing.yaml:9:58: error[YAML_SYNTAX]: "), "\(report)")
        #expect(report.contains("help: quote a value that starts with `*`, such as the content type `\"*/*\"`"), "\(report)")
    }

    @Test(
        "a file where a file cannot be is refused at the place that puts it there",
        arguments: [
            (
                ["files: list<file>"], [String](), 9, 10, "UNKNOWN_TYPE]: a list cannot hold files",
                "declare one `file` field for each file a row names"
            ),
            (
                ["photo: { type: file?, max_bytes: 1MB, content_types: [image/png], default: null }"], [], 9, 78,
                "DEFAULT_TYPE_MISMATCH]: file field 'photo' cannot have a default: a row names a file that was uploaded for it",
                "remove `default`; a missing file reads as null"
            ),
            (
                ["photo: { type: file, max_bytes: 1MB, content_types: [image/png], max_length: 3 }"], [], 9, 68,
                "MAX_LENGTH_NOT_APPLICABLE]: `max_length` does not apply to type `file`",
                "a file's size is limited by `max_bytes`; remove `max_length`"
            ),
            (
                ["note: { type: string, content_types: [text/plain] }"], [], 9, 25,
                "UNKNOWN_KEY]: `content_types` only applies to file fields", "make the field `type: file`, or remove `content_types`"
            ),
            (
                ["photo: { type: fiel? }"], [], 9, 18, "UNKNOWN_TYPE]: unknown type 'fiel'", "did you mean 'file'?"
            ),
            (
                [], ["draft: file?"], 10, 10,
                "UNKNOWN_TYPE]: local field 'draft' cannot be a file: files travel through the server, and local fields never leave the device",
                "declare the file among the synced `fields`, or keep a path on the device as a `string`"
            ),
            (
                ["photo: { type: file, max_bytes: 2000GB, content_types: [image/png] }"], [], 9, 35,
                "INVALID_VALUE]: max_bytes '2000GB' is above the largest size, 1000GB", "give a size from 1B to 1000GB"
            ),
        ])
    func refusedPlaces(fields: [String], local: [String], line: Int, column: Int, message: String, help: String) throws {
        #expect(
            try folderReport(entity(fields, local: local)) == """
                contracts/entities/thing.yaml:\(line):\(column): error[\(message)
                  help: \(help)
                1 error, 0 warnings
                """)
    }

    @Test("a file primary key is INVALID_PRIMARY_KEY at its type")
    func primaryKey() throws {
        let text = """
            entity: Thing
            summary: A thing.
            version: 1
            table: things
            scope: user
            sync: { direction: both, conflict: last_writer_wins }
            fields:
              page: { type: file, primary_key: true, max_bytes: 1MB, content_types: [image/png] }
            """
        #expect(
            try folderReport(text) == """
                contracts/entities/thing.yaml:8:17: error[INVALID_PRIMARY_KEY]: primary key 'page' has type `file`; keys are id, uuid, string or int
                  help: use `type: id` (a ULID or other text id made on the device)
                1 error, 0 warnings
                """)
    }

    @Test(
        "a file in an index or a unique index is UNKNOWN_INDEX_FIELD at the index", arguments: ["[photo]", "{ fields: [id, photo], unique: true }"])
    func index(index: String) throws {
        #expect(
            try folderReport(entity([Self.photo], local: []) + "indexes:\n  - \(index)\n") == """
                contracts/entities/thing.yaml:11:5: error[UNKNOWN_INDEX_FIELD]: 'photo' has type `file` and cannot be indexed
                  help: rows are not looked up by a file reference; index a field that names what you look up
                1 error, 0 warnings
                """)
    }

    @Test("a file as a relation's foreign key is FOREIGN_KEY_TYPE_MISMATCH at the relation")
    func foreignKey() throws {
        let text =
            entity(["parent_id: { type: file?, max_bytes: 1MB, content_types: [image/png] }"])
            + "relations:\n  parent: { belongs_to: Thing, foreign_key: parent_id }\n"
        #expect(
            try folderReport(text) == """
                contracts/entities/thing.yaml:11:45: error[FOREIGN_KEY_TYPE_MISMATCH]: foreign key 'Thing.parent_id' has type `file`, but it must hold the primary key of 'Thing' (id)
                  help: declare it as `parent_id: ref<Thing>`
                1 error, 0 warnings
                """)
    }

    @Test("a subscription cannot filter on a file: SUBSCRIPTION_FILTER at the condition")
    func subscriptionFilter() throws {
        let manifest =
            ContractFolder.defaultManifest + """

                subscriptions:
                  by_photo:
                    doc: Things by their photo.
                    entity: Thing
                    parameters: { photo: string }
                    where: { photo: "{photo}" }
                    ttl: 7d
                """
        let folder = try ContractFolder(files: ["entities/thing.yaml": entity([Self.photo])], manifest: manifest)
        defer { folder.remove() }
        #expect(
            folder.report() == """
                contracts/contracts.yaml:10:14: error[SUBSCRIPTION_FILTER]: subscription 'by_photo' cannot filter on Thing.photo: 'photo' is a file: rows hold a reference to it, not a value a filter compares
                  help: filter on a synced, unencrypted `id`, `string` or `enum` field, or a `ref<T>` to an entity keyed by `id` or `string`
                1 error, 0 warnings
                """)
    }

    // MARK: Generation

    @Test("generated: FileReference in the DTO, kind .file with maxBytes and contentTypes in the registry, TEXT columns")
    func generation() throws {
        let set = try compileValid([
            "entities/thing.yaml": entity([
                Self.photo, "scan: { type: file, max_bytes: 1500kB, content_types: [\"*/*\"], encrypted: true }", "note: string?",
            ])
        ])
        let files = Dictionary(uniqueKeysWithValues: ContractCompiler.generate(set).map { ($0.path, $0.contents) })
        let dto = try #require(files["Entities/Thing.swift"])
        #expect(dto.contains("    public var photo: FileReference?\n"))
        #expect(
            dto.contains("    /// Encrypted at rest on the device. A file of at most 1500kB, of type `*/*`.\n    public var scan: FileReference\n"))
        #expect(dto.contains("photo = try container.decodeIfPresent(FileReference.self, forKey: .photo)"))
        #expect(!dto.contains("import Foundation"), "FileReference is ContractRuntime's")
        let registry = try #require(files["ContractRegistry.swift"])
        #expect(
            registry.contains(
                #"FieldDescriptor(name: "photo", kind: .file, isOptional: true, maxBytes: 10000000, contentTypes: ["image/jpeg", "image/*"]),"#))
        #expect(registry.contains(#"FieldDescriptor(name: "scan", kind: .file, isEncrypted: true, maxBytes: 1500000, contentTypes: ["*/*"]),"#))
        #expect(registry.contains(#"FieldDescriptor(name: "note", kind: .string, isOptional: true),"#), "no contentTypes but on files")
        let client = try #require(files["ClientMigrations.swift"])
        #expect(client.contains(#""photo" TEXT,"#) && client.contains(#""scan" BLOB NOT NULL,"#))
        let server = try #require(files["ServerMigrations.swift"])
        #expect(server.contains(#""photo" TEXT,"#) && server.contains(#""scan" TEXT NOT NULL,"#))
        let postgres = try #require(files["ServerPostgresMigrations.swift"])
        #expect(postgres.contains(#""photo" TEXT,"#) && postgres.contains(#""scan" TEXT NOT NULL,"#))
    }

    @Test("the generated descriptor is one the runtime's codec checks a reference against")
    func runtimeAgrees() throws {
        let photo = try #require(try compiledThing(entity([Self.photo])).field(named: "photo"))
        let descriptor = FieldDescriptor(
            name: photo.name, kind: photo.type.type, isOptional: photo.type.isOptional, maxBytes: photo.maxBytes, contentTypes: photo.contentTypes)
        #expect(descriptor.maxBytes == photo.effectiveMaxBytes)
        let jpeg = try FileReference(sha256: String(repeating: "a", count: 64), byteCount: 9_000_000, contentType: "image/jpeg")
        #expect(jpeg.hasContentType(in: descriptor.contentTypes) && jpeg.byteCount <= Int64(descriptor.maxBytes ?? 0))
        let pdf = try FileReference(sha256: String(repeating: "b", count: 64), byteCount: 10, contentType: "application/pdf")
        #expect(!pdf.hasContentType(in: descriptor.contentTypes))
    }

    @Test("the runtime's default row limit leaves a file's limit out, as the compiler does")
    func runtimeRowLimit() throws {
        let contract = try compiledThing(entity([Self.photo]))
        let fields = contract.fields.map {
            FieldDescriptor(name: $0.name, kind: $0.type.type, maxLength: $0.maxLength, maxBytes: $0.maxBytes, contentTypes: $0.contentTypes)
        }
        #expect(RowSize.defaultMaximumBytes(fields: fields) == contract.effectiveMaxBytes)
    }

    // MARK: The lock

    @Test("the lock records max_bytes and content_types; changing either at a released version is VERSION_NOT_BUMPED")
    func lock() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        let field = "photo: { type: file?, max_bytes: 10MB, content_types: [image/jpeg, \"*/*\"] }"
        try workspace.write(ContractText(version: 1, fields: [field]))
        try workspace.lock()
        let text = try #require(workspace.lockText())
        #expect(text.contains(#"photo: { type: file?, max_bytes: 10MB, content_types: ["image/jpeg", "*/*"] }"#), "\(text)")
        #expect(try workspace.check().diagnostics.diagnostics.isEmpty, "the lock reads back")

        for changed in [
            "photo: { type: file?, max_bytes: 11MB, content_types: [image/jpeg, \"*/*\"] }",
            "photo: { type: file?, max_bytes: 10MB, content_types: [image/jpeg, \"*/*\", image/png] }",
        ] {
            try workspace.write(ContractText(version: 1, fields: [changed]))
            let rules = try workspace.check().diagnostics.diagnostics.map(\.rule)
            #expect(rules.contains(.versionNotBumped), "\(changed): \(rules)")
        }
    }

    @Test("a narrowed file field is reported at its key, naming the released version")
    func narrowingReport() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(ContractText(version: 1, fields: [Self.photo]))
        try workspace.lock()
        try workspace.write(ContractText(version: 2, fields: ["photo: { type: file?, max_bytes: 5MB, content_types: [image/jpeg] }"]))
        let report = workspace.readable(try workspace.check().diagnostics)
        #expect(
            report.contains(
                "contracts/entities/item.yaml:10:25: error[FILE_MAX_BYTES_REDUCED]: file field 'photo' takes files of at most 5MB now, but 10MB in version 1, whose devices may name larger ones"
            ), "\(report)")
        #expect(
            report.contains(
                "contracts/entities/item.yaml:10:41: error[FILE_CONTENT_TYPES_NARROWED]: file field 'photo' no longer accepts 'image/*', which version 1 accepts"
            ), "\(report)")
    }
}
