import ContractRuntime
import Contracts
import Foundation
import SyncClient

/// Files a command hands the device for `file` fields (`attach`, or `--field photo_file=@shot.jpg`):
/// each copied into the store's files folder with the field's limits checked as it is copied
/// (`OfflineStore.importFile(at:contentType:name:for:)`), so the write that names it records it
/// waiting to upload in its own transaction. A copy no write named (the command failed after
/// the import) is discarded at once.
final class FileImports {
    private let store: OfflineStore
    private var imported: [FileReference] = []

    init(store: OfflineStore) {
        self.store = store
    }

    /// `@PATH`, `@PATH;type=image/png` or `@PATH;name=shot.jpg` of a `--field` value.
    struct Source {
        var path: String
        var contentType: String?
        var name: String?

        /// The parts of `text` after its `@`.
        init(parsing text: String) {
            var parts = text.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
            path = parts.removeFirst()
            for part in parts {
                if part.hasPrefix("type=") { contentType = String(part.dropFirst(5)) }
                if part.hasPrefix("name=") { name = String(part.dropFirst(5)) }
            }
        }

        init(path: String, contentType: String?, name: String?) {
            self.path = path
            self.contentType = contentType
            self.name = name
        }
    }

    /// Copies the file at `source` into the store for `field` of `contract` and returns its
    /// reference: its content type the one given, else the one its name or first bytes say.
    /// - Throws: ``DeviceFailure``: the file cannot be read (exit 66), it is refused by the
    ///   field's limits or is not of its type (exit 7), the volume is full (exit 2).
    func importFile(_ source: Source, contract: String, field: FieldDescriptor) throws(DeviceFailure) -> FileReference {
        let url = URL(fileURLWithPath: (source.path as NSString).expandingTildeInPath)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue,
            FileManager.default.isReadableFile(atPath: url.path)
        else {
            throw DeviceFailure(
                message: "\(contract).\(field.name): cannot read the file \(source.path)", hint: "give the path of a readable file",
                exitCode: DeviceExit.noInput)
        }
        let type = source.contentType ?? Self.contentType(of: url)
        do {
            let reference = try store.importFile(
                at: url, contentType: type, name: source.name ?? url.lastPathComponent, for: FileField(contract: contract, field: field.name))
            imported.append(reference)
            return reference
        } catch {
            throw DeviceFailure(error)
        }
    }

    /// Deletes the copies of this run's imports no write named (a command that failed after them).
    func discardUnused() {
        for reference in imported { store.discardImportedFile(reference) }
        imported = []
    }

    /// The content type of the file at `url`: by its first bytes where a type has a signature,
    /// else by its extension, else `application/octet-stream`.
    static func contentType(of url: URL) -> String {
        if let handle = try? FileHandle(forReadingFrom: url) {
            let head = (try? handle.read(upToCount: 16)) ?? Data()
            try? handle.close()
            if let type = contentType(ofBytes: head) { return type }
        }
        return byExtension[url.pathExtension.lowercased()] ?? "application/octet-stream"
    }

    /// The type the first bytes of a file say, for the common signatures.
    static func contentType(ofBytes head: Data) -> String? {
        let bytes = [UInt8](head)
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            bytes.count >= offset + prefix.count && Array(bytes[offset..<offset + prefix.count]) == prefix
        }
        if starts([0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if starts(Array("GIF8".utf8)) { return "image/gif" }
        if starts(Array("%PDF-".utf8)) { return "application/pdf" }
        if starts(Array("RIFF".utf8)), starts(Array("WEBP".utf8), at: 8) { return "image/webp" }
        if starts(Array("ftyp".utf8), at: 4) {
            let brand = bytes.count >= 12 ? String(decoding: bytes[8..<12], as: UTF8.self) : ""
            return ["heic", "heix", "mif1", "msf1", "heim", "heis"].contains(brand) ? "image/heic" : "video/mp4"
        }
        return nil
    }

    private static let byExtension = [
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "heic": "image/heic", "gif": "image/gif", "webp": "image/webp",
        "pdf": "application/pdf", "mp3": "audio/mpeg", "wav": "audio/wav", "mp4": "video/mp4", "txt": "text/plain", "json": "application/json",
        "zip": "application/zip",
    ]
}
