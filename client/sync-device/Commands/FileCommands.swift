import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import SyncClient

// `attach` and `file`: the files of `file` fields. A file is copied into the device's store
// with the write that names it (uploaded before that write on the next sync, resumed after a
// cut or a kill); a file a row names is downloaded on demand, in ranges, checked against its
// SHA-256 and cached.

struct AttachCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "attach",
        abstract: "Give a row's file field a file: copied into the device with the change, uploaded before it on the next sync.",
        discussion: """
            The file is copied into the device's files folder and hashed as it is copied, its size and \
            type checked against the field's contract (max_bytes, content_types) first: a file too large \
            or of a type the field does not accept is refused (exit 7) before anything is copied or \
            queued. The change setting the field and the file are stored in one transaction. The next \
            `sync` uploads the file (resuming where a cut connection or a killed process left it), then \
            pushes the change; the server never holds the change without its file. The content type is \
            taken from the file's first bytes or its name unless --content-type says.

            An event's file is given when the event is recorded: \
            sync-device event issue-logged --field photo_file=@shot.jpg …

            Exit codes beyond the usual: 7 the file is refused (too large, a type the field does not \
            accept, bytes not of the type declared), 66 the file cannot be read.
            """
    )

    @Argument(help: "The entity: a contract name or its table.")
    var entity: String

    @Argument(help: "The row's id.")
    var id: String

    @Argument(help: "The row's file field.")
    var field: String

    @Argument(help: "The file to attach.")
    var path: String

    @Option(name: .customLong("content-type"), help: "The file's media type (default: by its first bytes or its name).")
    var contentType: String?

    @Option(help: "The name the file is shown with (default: the file's own name).")
    var name: String?

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let (descriptor, type) = try FileFields.entity(named: entity, for: "attach")
        try RowCommands.refuseServerOwned(descriptor, action: "given a file")
        let field = try FileFields.field(named: self.field, in: descriptor.name, fields: descriptor.fields)
        let files = FileImports(store: session.store)
        do {
            let reference = try attach(type, field: field, files: files, session: session)
            Console.say(
                "attached \(FileFields.describe(reference)) to \(descriptor.name) \(id) \(field.name); \(try session.queuedNote()); "
                    + "the file goes up before the change")
        } catch {
            files.discardUnused()
            throw error
        }
    }

    /// Reads the row, imports the file for its field and stores the row naming it: one write.
    private func attach<E: ContractEntity>(
        _ type: E.Type, field: FieldDescriptor, files: FileImports, session: DeviceSession
    ) throws -> FileReference {
        guard let current = try session.store.fetch(E.self, id: id) else { throw DeviceFailure.noRow(E.descriptor, id: id) }
        var wire = Wire.object(current)
        let reference = try files.importFile(
            FileImports.Source(path: path, contentType: contentType, name: name), contract: E.descriptor.name, field: field)
        if case .list = field.kind {
            // A list of files: the new one joins those the row names.
            var list: [JSONValue] = []
            if case .array(let items)? = wire[field.name] { list = items }
            if !list.contains(reference.json) { list.append(reference.json) }
            wire[field.name] = .array(list)
        } else {
            wire[field.name] = reference.json
        }
        let changed = try Wire.decode(E.self, from: wire, contract: E.descriptor.name)
        if try session.store.update(changed) == nil {
            Console.note("note: \(E.descriptor.name) \(id) already names this file; nothing new to queue")
        }
        return reference
    }
}

struct FileCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "file",
        abstract: "The file a row's (or an event's) file field names: from the device, or downloaded, checked and cached.",
        discussion: """
            A file the device holds is answered at once. Otherwise it is downloaded from the server in \
            ranges (4 MiB, or $OUTPOST_FILE_CHUNK_BYTES), into a partial file that a later run resumes after \
            a cut or a kill, then checked against its SHA-256 and size before it is kept in the device's \
            cache. The hash printed is the one the file was checked against. With --out the file is copied \
            there; otherwise its path in the cache is printed. Progress (bytes, percent, rate) goes to \
            standard error: a bar on a terminal, lines otherwise, nothing with --quiet.

            Exit codes beyond the usual: 6 the row names no file in the field, or the server does not hold \
            it for this user; 3 the network failed (run again: it resumes) or the bytes did not match the \
            hash (they are deleted).

            Example: sync-device file issue-logged 01JF… photo_file --out photo.jpg
            """
    )

    @Argument(help: "The entity or event: a contract name or its table.")
    var contract: String

    @Argument(help: "The row's id (an event's event id).")
    var id: String

    @Argument(help: "The file field.")
    var field: String

    @Option(help: ArgumentHelp("Where to write the file (replaced if it exists).", valueName: "PATH"))
    var out: String?

    @OptionGroup var device: DeviceOptions
    @OptionGroup var progress: ProgressOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let (name, fields, wire) = try FileFields.row(contract, id: id, session: session)
        let field = try FileFields.field(named: self.field, in: name, fields: fields)
        let value = wire[field.name] ?? .null
        let reference: FileReference
        switch value {
        case .null:
            throw DeviceFailure.notFound("\(name) \(id) has no file in \(field.name)")
        case .array(let items):
            guard items.count == 1, let only = try? FileReference(json: items[0]) else {
                throw DeviceFailure.usage("\(name).\(field.name) of \(id) names \(items.count) files; `file` fetches a field naming one")
            }
            reference = only
        default:
            do { reference = try FileReference(json: value) } catch {
                throw DeviceFailure.failure("\(name).\(field.name) of \(id) does not hold a file reference: \(error)")
            }
        }

        var downloaded = false
        var url: URL
        if let local = try session.store.localFile(for: reference) {
            url = local
        } else {
            url = try await download(reference, session: session)
            downloaded = true
        }
        var written: URL?
        if let out {
            let target = URL(fileURLWithPath: (out as NSString).expandingTildeInPath).standardizedFileURL
            try Self.copy(url, to: target)
            written = target
            url = target
        }
        if output.json {
            Console.json(
                .object([
                    "contract": .string(name), "id": .string(id), "field": .string(field.name), "sha256": .string(reference.sha256),
                    "size": .int(reference.byteCount), "content_type": .string(reference.contentType),
                    "name": reference.name.map(JSONValue.string) ?? .null, "downloaded": .bool(downloaded),
                    "path": .string(url.path), "written": .bool(written != nil),
                ]))
            return
        }
        Console.say("\(name) \(id) \(field.name): \(FileFields.describe(reference, hash: false))")
        Console.say("sha256 \(reference.sha256) (checked)")
        if let written {
            Console.say("written to \(written.path)" + (downloaded ? " (downloaded, and cached on the device)" : " (from the device)"))
        } else {
            Console.say((downloaded ? "downloaded and cached at " : "on the device at ") + url.path)
        }
    }

    /// Downloads the file through the engine (resuming a partial download), its bytes drawn as
    /// they arrive.
    private func download(_ reference: FileReference, session: DeviceSession) async throws(DeviceFailure) -> URL {
        let meter = TransferMeter("download", style: progress.style)
        meter.begin(total: reference.byteCount, done: min(reference.byteCount, session.store.partialFileSize(sha256: reference.sha256)))
        session.network.observeFileBytes { meter.add($0) }
        defer {
            session.network.observeFileBytes(nil)
            meter.finish()
        }
        do {
            return try await session.engine().file(for: reference)
        } catch {
            throw DeviceFailure(error)
        }
    }

    /// Copies `source` to `target` through a temporary file beside it, so `target` is never half
    /// written.
    private static func copy(_ source: URL, to target: URL) throws(DeviceFailure) {
        let manager = FileManager.default
        let partial = target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).partial")
        do {
            try? manager.removeItem(at: partial)
            try manager.copyItem(at: source, to: partial)
            if manager.fileExists(atPath: target.path) {
                _ = try manager.replaceItemAt(target, withItemAt: partial)
            } else {
                try manager.moveItem(at: partial, to: target)
            }
        } catch {
            try? manager.removeItem(at: partial)
            throw .failure("cannot write \(target.path): \(error.localizedDescription)", hint: "check the folder exists and is writable")
        }
    }
}

/// What `attach` and `file` share: finding a contract's file field, and a row's wire values.
enum FileFields {
    /// The entity `name`; an event is refused with how its files are given.
    static func entity(named name: String, for command: String) throws(DeviceFailure) -> (
        descriptor: EntityDescriptor, type: any ContractEntity.Type
    ) {
        do {
            return try ContractLookup.entity(named: name)
        } catch {
            guard let (event, _) = try? ContractLookup.event(named: name) else { throw error }
            let file = event.fields.first(where: { isFile($0.kind) })?.name ?? "FIELD"
            throw .usage(
                "\(event.name) is an event: its file is given when it is recorded, not \(command)ed later",
                hint: "sync-device event \(ContractLookup.kebab(event.name)) --field \(file)=@PATH …")
        }
    }

    /// The `file` field (or list of files) `name` of a contract.
    static func field(named name: String, in contract: String, fields: [FieldDescriptor]) throws(DeviceFailure) -> FieldDescriptor {
        let files = fields.filter { isFile($0.kind) }.map(\.name)
        guard let field = fields.first(where: { $0.name == name }) else {
            throw .usage(
                "\(contract) has no field '\(name)'",
                hint: files.isEmpty ? "\(contract) has no file field" : "its file fields: " + files.joined(separator: ", "))
        }
        guard isFile(field.kind) else {
            throw .usage(
                "\(contract).\(name) is not a file field (it is \(FieldAssignments.describe(field.kind)))",
                hint: files.isEmpty ? "\(contract) has no file field" : "its file fields: " + files.joined(separator: ", "))
        }
        return field
    }

    static func isFile(_ kind: FieldKind) -> Bool {
        switch kind {
        case .file: return true
        case .list(let element): return isFile(element)
        default: return false
        }
    }

    /// The contract's name and fields, and the wire values of row (or event) `id` of it.
    static func row(_ contract: String, id: String, session: DeviceSession) throws -> (String, [FieldDescriptor], [String: JSONValue]) {
        if let (descriptor, type) = try? ContractLookup.entity(named: contract) {
            return (descriptor.name, descriptor.fields, try entityRow(type, id: id, session: session))
        }
        guard let (descriptor, type) = try? ContractLookup.event(named: contract) else {
            // Neither: the entity lookup's message, which lists the entities.
            _ = try ContractLookup.entity(named: contract)
            throw DeviceFailure.usage("no contract is named '\(contract)'")
        }
        return (descriptor.name, descriptor.fields, try eventRow(type, id: id, session: session))
    }

    private static func entityRow<E: ContractEntity>(_ type: E.Type, id: String, session: DeviceSession) throws -> [String: JSONValue] {
        guard let row = try session.store.fetch(E.self, id: id) else { throw DeviceFailure.noRow(E.descriptor, id: id) }
        return Wire.object(row)
    }

    private static func eventRow<P: ContractEvent>(_ type: P.Type, id: String, session: DeviceSession) throws -> [String: JSONValue] {
        let envelope = try session.store.read { reader throws(OfflineStoreError) in try reader.event(P.self, id: id) }
        guard let envelope else {
            throw DeviceFailure.notFound(
                "no \(P.descriptor.name) '\(id)' on this device",
                hint: "`sync-device sync` brings the team's events; an event's id is printed when it is recorded")
        }
        return Wire.object(envelope.payload)
    }

    /// `shot.jpg (image/jpeg, 1.5 kB, sha256 3f2a9c…)`.
    static func describe(_ reference: FileReference, hash: Bool = true) -> String {
        var parts = [reference.contentType, Wording.bytes(reference.byteCount)]
        if hash { parts.append("sha256 \(reference.sha256.prefix(12))…") }
        return (reference.name ?? "a file") + " (" + parts.joined(separator: ", ") + ")"
    }
}
