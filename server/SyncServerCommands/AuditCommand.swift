import ArgumentParser
import Foundation
import SyncServer

struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Work with the append-only audit log.",
        subcommands: [Verify.self, Export.self, Archive.self]
    )

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check every seal of the audit log, and its sealed head.",
            discussion: """
                Prints `audit log intact: N entries` and exits 0, or names the first position where the log does not \
                hold and why, and exits 1: an entry rewritten (even rehashed), removed or reordered, the tail cut, \
                the head rewritten. With --checkpoint, also checks the log against a checkpoint exported earlier \
                (`audit export`), which catches a log cut back to an older head. With --archive, verifies an archive \
                file (`audit archive`) on its own, with the audit key only: from its start line to its sealed end.
                """
        )

        @OptionGroup var data: DataOptions

        @Option(help: ArgumentHelp("An export (or checkpoint) file written earlier by `audit export`.", valueName: "FILE"))
        var checkpoint: String?

        @Option(help: ArgumentHelp("Verify this archive file (written by `audit archive`) instead of the database.", valueName: "FILE"))
        var archive: String?

        func validate() throws {
            if archive != nil, checkpoint != nil { throw ValidationError("give --archive or --checkpoint, not both") }
        }

        func run() async throws {
            if let archive {
                // Mapped, not read: an archive of years is large.
                guard let contents = try? Data(contentsOf: URL(fileURLWithPath: archive), options: .alwaysMapped) else {
                    throw fail("cannot read \(archive)")
                }
                // Never make a key here: a new key would only say that nothing holds.
                let keyFile = data.directory.url.appendingPathComponent(AuditKey.fileName).path
                if data.auditKeyFile == nil, (ProcessInfo.processInfo.environment[AuditKey.environmentVariable] ?? "").isEmpty,
                    !FileManager.default.fileExists(atPath: keyFile)
                {
                    throw fail(
                        "no audit key to verify \(archive) with: \(keyFile) does not exist; give --audit-key-file FILE or the folder `serve --data` uses"
                    )
                }
                switch AuditChain.verifyArchive(contents, key: try data.auditKey()) {
                case .intact(let entries, _):
                    say("audit archive intact: \(entries) \(entries == 1 ? "entry" : "entries")")
                case .broken(let entryID, let reason):
                    say("audit archive broken at entry \(entryID): \(reason)")
                    throw Exit.auditBroken
                }
                return
            }
            guard data.postgres != nil || data.directory.hasDatabase else {
                throw fail("no server database in \(data.directory.url.path); give the folder `serve --data` uses")
            }
            var mark: AuditCheckpoint?
            if let checkpoint {
                guard let contents = FileManager.default.contents(atPath: checkpoint) else { throw fail("cannot read \(checkpoint)") }
                guard let found = AuditCheckpoint.last(in: contents) else { throw fail("\(checkpoint) holds no checkpoint line") }
                mark = found
            }
            let storage = try await data.openStorage()
            let verification: AuditChain.Verification
            let head: AuditHead?
            do {
                verification = try await AuditChain.verify(storage, checkpoint: mark)
                head = try await storage.read { try await $0.auditHead() }
                await data.close(storage)
            } catch {
                await data.close(storage)
                throw fail("cannot read the audit log: \(error)")
            }
            switch verification {
            case .intact(let entries, let keyedFrom):
                say("audit log intact: \(entries) \(entries == 1 ? "entry" : "entries")")
                if let base = head?.base {
                    say("note: entries 1–\(base.lastID) were archived; the log here starts after the sealed base at entry \(base.lastID)")
                }
                if let detailsFrom = head?.detailsFrom, detailsFrom > 1 {
                    say("note: entries 1–\(detailsFrom - 1) were written before details were encrypted: their details cannot be erased")
                }
                if keyedFrom > 1 {
                    say("note: entries 1–\(keyedFrom - 1) were written before the log was keyed: they are hash-chained only")
                }
            case .broken(let entryID, let reason):
                say("audit log broken at entry \(entryID): \(reason)")
                throw Exit.auditBroken
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the audit log as JSON lines, ending with a sealed checkpoint.",
            discussion: """
                One JSON object per entry, then `{"checkpoint": {...}}`: the sealed head when the export began. Keep \
                exports (or their last line) outside the database: `audit verify --checkpoint FILE` proves the log \
                still holds everything they name.
                """
        )

        @OptionGroup var data: DataOptions

        @Option(help: ArgumentHelp("Write to this file instead of standard output.", valueName: "FILE"))
        var out: String?

        func run() async throws {
            guard data.postgres != nil || data.directory.hasDatabase else {
                throw fail("no server database in \(data.directory.url.path); give the folder `serve --data` uses")
            }
            let handle: FileHandle
            if let out {
                guard FileManager.default.createFile(atPath: out, contents: nil), let file = FileHandle(forWritingAtPath: out) else {
                    throw fail("cannot write \(out)")
                }
                handle = file
            } else {
                handle = FileHandle.standardOutput
            }
            let storage = try await data.openStorage()
            do {
                try await AuditChain.export(storage) { handle.write($0) }
                await data.close(storage)
            } catch {
                await data.close(storage)
                throw fail("cannot export the audit log: \(error)")
            }
            if out != nil { try? handle.close() }
        }
    }

    struct Archive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move the audit entries recorded before a date to an archive file.",
            discussion: """
                Writes the entries recorded before DATE (the log's oldest, up to the first at or after DATE) to FILE as \
                JSON lines: a start line (the genesis, or where the previous archive ended), one line per entry as \
                `audit export` writes them (encrypted details stay encrypted), and a sealed checkpoint. The file is \
                synced and renamed into place before the entries are deleted and the database records where the \
                archive ended; `audit verify` then starts there. After a crash, run the same command again. \
                `audit verify --archive FILE` checks an archive on its own.
                """
        )

        @OptionGroup var data: DataOptions

        @Option(
            help: ArgumentHelp(
                "Archive the entries recorded before this UTC date (2026-01-01) or date-time (2026-01-01T12:00:00Z).", valueName: "DATE"))
        var before: String

        @Option(help: ArgumentHelp("The archive file to write (refused if it exists and holds another archive).", valueName: "FILE"))
        var to: String

        func validate() throws {
            if Self.parse(before) == nil {
                throw ValidationError("--before must be an ISO 8601 date (2026-01-01) or date-time (2026-01-01T12:00:00Z), not '\(before)'")
            }
            if to.isEmpty { throw ValidationError("--to needs a file") }
        }

        /// Milliseconds since 1970 of a date (midnight UTC) or a date-time (with its offset, UTC without).
        static func parse(_ text: String) -> Int64? {
            let formatter = ISO8601DateFormatter()
            formatter.timeZone = TimeZone(identifier: "UTC")
            let forms: [ISO8601DateFormatter.Options] = [
                [.withFullDate], [.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds],
                [.withFullDate, .withTime, .withColonSeparatorInTime, .withDashSeparatorInDate],
            ]
            for options in forms {
                formatter.formatOptions = options
                if let date = formatter.date(from: text) { return Int64((date.timeIntervalSince1970 * 1000).rounded()) }
            }
            return nil
        }

        func run() async throws {
            guard data.postgres != nil || data.directory.hasDatabase else {
                throw fail("no server database in \(data.directory.url.path); give the folder `serve --data` uses")
            }
            guard let cutoff = Self.parse(before) else { throw fail("--before: not a date") }
            let file = URL(fileURLWithPath: (to as NSString).expandingTildeInPath)
            let storage = try await data.openStorage()
            let summary: AuditArchiveSummary?
            do {
                summary = try await AuditChain.archive(storage, before: cutoff, to: file)
                await data.close(storage)
            } catch {
                await data.close(storage)
                throw fail("cannot archive the audit log: \(error)")
            }
            guard let summary else {
                say("nothing to archive: no audit entry in the database was recorded before \(before)")
                return
            }
            let count = summary.lastID - summary.firstID + 1
            say("archived \(count) \(count == 1 ? "entry" : "entries") (\(summary.firstID)–\(summary.lastID)) to \(file.path)")
        }
    }
}
