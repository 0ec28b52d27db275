import ArgumentParser
import Foundation
import SyncServer

struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Work with the append-only audit log.",
        subcommands: [Verify.self]
    )

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Recompute the audit log's hash chain.",
            discussion: """
                Prints `audit log intact: N entries` and exits 0, or names the first entry whose link does not \
                hold and why, and exits 1.
                """
        )

        @OptionGroup var data: DataOptions

        func run() async throws {
            guard data.postgres != nil || data.directory.hasDatabase else {
                throw fail("no server database in \(data.directory.url.path); give the folder `serve --data` uses")
            }
            let storage = try await data.openStorage()
            let verification: AuditChain.Verification
            do {
                verification = try await AuditChain.verify(storage)
                await data.close(storage)
            } catch {
                await data.close(storage)
                throw fail("cannot read the audit log: \(error)")
            }
            switch verification {
            case .intact(let entries):
                say("audit log intact: \(entries) \(entries == 1 ? "entry" : "entries")")
            case .broken(let entryID, let reason):
                say("audit log broken at entry \(entryID): \(reason)")
                throw Exit.auditBroken
            }
        }
    }
}
