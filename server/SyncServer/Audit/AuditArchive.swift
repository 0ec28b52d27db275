public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What `audit archive` wrote and moved out of the database.
public struct AuditArchiveSummary: Hashable, Sendable {
    /// The first and last archived entry ids.
    public var firstID: Int64
    /// The last archived entry's id.
    public var lastID: Int64
    /// The sealed checkpoint the archive ends with (the next archive starts there).
    public var checkpoint: AuditCheckpoint
}

/// Why an archive could not be made.
public enum AuditArchiveError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The log does not verify up to the entries to archive: nothing is archived.
    case broken(entryID: Int64, reason: String)
    /// Another archive moved the base meanwhile, or the archived entries changed: nothing deleted.
    case baseMoved
    /// The file exists and is not this same archive written before (a retry).
    case fileExists(path: String)
    /// The file could not be written.
    case unwritable(path: String, reason: String)
    /// The log has no head: the database's migrations have not run.
    case noHead

    /// What is wrong, for the `audit` command's output.
    public var description: String {
        switch self {
        case .broken(let entryID, let reason): return "the audit log is broken at entry \(entryID) (\(reason)): nothing archived"
        case .baseMoved: return "another archive ran meanwhile, or the archived entries changed: nothing was deleted; run the command again"
        case .fileExists(let path): return "\(path) exists and holds another archive; give a new file"
        case .unwritable(let path, let reason): return "cannot write \(path): \(reason)"
        case .noHead: return "the log has no head: the database's migrations have not run"
        }
    }
}

extension AuditChain {
    /// The first line of an archive: where its chain starts (the genesis, or the base the previous
    /// archive left), sealed as a base is.
    struct ArchiveStart: Codable, Hashable {
        var after_id: Int64
        var after_hash: String
        var keyed_from: Int64
        var seal: String
    }

    /// Moves the entries recorded before `cutoff` (milliseconds since 1970; a prefix of the chain,
    /// up to the first entry at or after it) to `file`, then out of the database.
    ///
    /// The file is JSON lines: `{"archive_start": …}`, one line per entry (as `audit export`
    /// writes them, encrypted details kept encrypted), and the sealed checkpoint of its last entry.
    /// The entries are verified as they are written (a broken log is not archived). The file is
    /// written to a temporary name, synced and renamed; only then does one transaction delete the
    /// entries and record the new base. A crash in between leaves the entries in the database and
    /// a complete file: running again with the same file rewrites it and finishes.
    /// - Returns: `nil` when no entry is before `cutoff` (nothing written).
    public static func archive(
        _ storage: any ServerStorage, before cutoff: Int64, to file: URL, pageSize: Int = 1000
    ) async throws -> AuditArchiveSummary? {
        let storage = storage.engine
        let key = storage.auditKey
        guard let head = try await storage.read({ try await $0.auditHead() }) else { throw AuditArchiveError.noHead }
        if let fingerprint = head.keyFingerprint, fingerprint != key.fingerprint {
            throw AuditArchiveError.broken(entryID: 1, reason: "the log is sealed with another key")
        }
        let previous = head.base ?? AuditBase.sealed(lastID: 0, lastHash: genesis, keyedFrom: head.keyedFrom, key: key)
        guard previous.seal == seal(baseID: previous.lastID, baseHash: previous.lastHash, keyedFrom: head.keyedFrom, key: key) else {
            throw AuditArchiveError.broken(entryID: previous.lastID, reason: "the archive base's seal does not hold")
        }
        let first = try await storage.read { try await $0.auditEntries(after: previous.lastID, limit: 1) }.first
        guard let first, first.recordedAt < cutoff, first.id <= head.lastID else { return nil }

        let start = ArchiveStart(after_id: previous.lastID, after_hash: previous.lastHash, keyed_from: head.keyedFrom, seal: previous.seal)
        let startLine = try encodedLine(["archive_start": start])
        if FileManager.default.fileExists(atPath: file.path) {
            // Only this same archive, written before a crash, may be written again.
            let existing = (try? Data(contentsOf: file, options: .alwaysMapped)) ?? Data()
            guard existing.prefix(while: { $0 != UInt8(ascii: "\n") }) + Data("\n".utf8) == startLine else {
                throw AuditArchiveError.fileExists(path: file.path)
            }
        }
        let temporary = file.deletingLastPathComponent().appendingPathComponent(".\(file.lastPathComponent).\(UUID().uuidString).tmp")
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil), let handle = FileHandle(forWritingAtPath: temporary.path) else {
            throw AuditArchiveError.unwritable(path: file.path, reason: "cannot create \(temporary.path)")
        }
        var last = previous
        var open = true
        do {
            try handle.write(contentsOf: startLine)
            var expectedID = previous.lastID + 1
            var done = false
            while !done {
                let after = last.lastID
                let page = try await storage.read { try await $0.auditEntries(after: after, limit: pageSize) }
                if page.isEmpty { break }
                var lines = Data()
                for entry in page {
                    if entry.recordedAt >= cutoff || entry.id > head.lastID {
                        done = true
                        break
                    }
                    if let problem = problem(with: entry, expectedID: expectedID, previousHash: last.lastHash, keyedFrom: head.keyedFrom, key: key) {
                        throw AuditArchiveError.broken(entryID: expectedID, reason: problem)
                    }
                    lines += try encodedLine(ExportedEntry(entry, readable: nil))
                    last = AuditBase(lastID: entry.id, lastHash: entry.hash, seal: "")
                    expectedID += 1
                }
                try handle.write(contentsOf: lines)
            }
            let checkpoint = AuditCheckpoint(
                lastID: last.lastID, lastHash: last.lastHash, keyedFrom: head.keyedFrom,
                seal: seal(lastID: last.lastID, lastHash: last.lastHash, keyedFrom: head.keyedFrom, key: key)
            )
            try handle.write(contentsOf: encodedLine(["checkpoint": checkpoint]))
            try handle.synchronize()
            try handle.close()
            open = false
            guard rename(temporary.path, file.path) == 0 else {
                throw AuditArchiveError.unwritable(path: file.path, reason: String(cString: strerror(errno)))
            }
            syncFolder(of: file)
            let base = AuditBase.sealed(lastID: last.lastID, lastHash: last.lastHash, keyedFrom: head.keyedFrom, key: key)
            _ = try await storage.write { try await $0.moveAuditBase(from: previous, to: base) }
            return AuditArchiveSummary(firstID: first.id, lastID: last.lastID, checkpoint: checkpoint)
        } catch {
            if open { try? handle.close() }
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
    }

    /// Makes a rename in the file's folder durable.
    private static func syncFolder(of file: URL) {
        let descriptor = open(file.deletingLastPathComponent().path, O_RDONLY)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }

    /// Why an entry does not hold at its place in the chain; `nil` when it does.
    private static func problem(with entry: AuditEntry, expectedID: Int64, previousHash: String, keyedFrom: Int64, key: AuditKey) -> String? {
        if entry.id != expectedID { return "the entry is missing: the log goes from \(expectedID - 1) to \(entry.id)" }
        if entry.previousHash != previousHash { return "its previous-hash does not match the entry before it" }
        let expected =
            entry.id < keyedFrom ? legacyHash(of: entry, previousHash: previousHash) : seal(of: entry, previousHash: previousHash, key: key)
        return expected == entry.hash ? nil : "its content does not match its seal"
    }

    /// Verifies an archive file on its own, with the audit key: its start line's seal, every
    /// entry's link and seal from there, and its last line, the sealed checkpoint of its last
    /// entry. `entries` counts the archived entries.
    public static func verifyArchive(_ data: Data, key: AuditKey) -> Verification {
        struct StartLine: Decodable { var archive_start: ArchiveStart }
        struct CheckpointLine: Decodable { var checkpoint: AuditCheckpoint }
        let decoder = JSONDecoder()
        let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
        guard let firstLine = lines.first, let start = try? decoder.decode(StartLine.self, from: Data(firstLine)).archive_start else {
            return .broken(entryID: 0, reason: "the file does not start with an archive_start line: it is not an audit archive")
        }
        guard start.seal == seal(baseID: start.after_id, baseHash: start.after_hash, keyedFrom: start.keyed_from, key: key) else {
            return .broken(entryID: start.after_id, reason: "the archive's start line's seal does not hold under this key")
        }
        var previous = start.after_hash
        var expectedID = start.after_id + 1
        for (index, line) in lines.dropFirst().enumerated() {
            let isLast = index == lines.count - 2
            if isLast, let checkpoint = try? decoder.decode(CheckpointLine.self, from: Data(line)).checkpoint {
                guard checkpoint.seal == seal(lastID: checkpoint.lastID, lastHash: checkpoint.lastHash, keyedFrom: checkpoint.keyedFrom, key: key),
                    checkpoint.keyedFrom == start.keyed_from
                else {
                    return .broken(entryID: checkpoint.lastID, reason: "the archive's end checkpoint's seal does not hold under this key")
                }
                guard checkpoint.lastID == expectedID - 1, checkpoint.lastHash == previous else {
                    return .broken(
                        entryID: expectedID, reason: "the archive ends at entry \(expectedID - 1) but its sealed checkpoint says \(checkpoint.lastID)"
                    )
                }
                return .intact(entries: Int(expectedID - 1 - start.after_id), keyedFrom: start.keyed_from)
            }
            guard let entry = try? decoder.decode(ExportedEntry.self, from: Data(line)).entry else {
                return .broken(entryID: expectedID, reason: "line \(index + 2) is not an audit entry")
            }
            if let problem = problem(with: entry, expectedID: expectedID, previousHash: previous, keyedFrom: start.keyed_from, key: key) {
                let reason =
                    entry.id == start.after_id + 1 && entry.id == expectedID && entry.previousHash != previous
                    ? "its previous-hash does not match the archive's start" : problem
                return .broken(entryID: expectedID, reason: reason)
            }
            previous = entry.hash
            expectedID += 1
        }
        return .broken(entryID: expectedID, reason: "the archive has no sealed checkpoint at its end: it was cut")
    }
}
