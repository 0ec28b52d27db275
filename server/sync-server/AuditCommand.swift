import ArgumentParser
import Foundation
import SyncServer

struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Work with the append-only audit log.",
        subcommands: [Verify.self, Export.self]
    )

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check every seal of the audit log, and its sealed head.",
            discussion: """
                Prints `audit log intact: N entries` and exits 0, or names the first position where the log does not \
                hold and why, and exits 1: an entry rewritten (even rehashed), removed or reordered, the tail cut, \
                the head rewritten. With --checkpoint, also checks the log against a checkpoint exported earlier \
                (`audit export`), which catches a log cut back to an older head.
                """
        )

        @OptionGroup var data: DataOptions

        @Option(help: ArgumentHelp("An export (or checkpoint) file written earlier by `audit export`.", valueName: "FILE"))
        var checkpoint: String?

        func run() async throws {
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
            do {
                verification = try await AuditChain.verify(storage, checkpoint: mark)
                await data.close(storage)
            } catch {
                await data.close(storage)
                throw fail("cannot read the audit log: \(error)")
            }
            switch verification {
            case .intact(let entries, let keyedFrom):
                say("audit log intact: \(entries) \(entries == 1 ? "entry" : "entries")")
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
}
