import ArgumentParser
import ContractCompiler
import Foundation

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a new contract set: a manifest, one entity, one event, the JSON Schema, the lock and a README.",
        discussion: """
            Writes DIR (which must not exist, or be empty): contracts.yaml with one scope, entities/note.yaml, \
            events/note_pinned.yaml, contract.schema.json for editors, contracts.lock with both contracts \
            released at version 1, and a README saying what to do next. `contractc check --contracts DIR` \
            passes at once, and `contractc generate --contracts DIR` writes their Swift.
            """
    )

    @Argument(help: ArgumentHelp("The folder of the new contract set.", valueName: "DIR"))
    var directory: String

    func run() throws {
        let folder = URL(fileURLWithPath: directory, isDirectory: true)
        let manager = FileManager.default
        if let existing = try? manager.contentsOfDirectory(atPath: folder.path), !existing.isEmpty {
            throw ValidationError("\(directory) is not empty: contractc init starts a new contract set in a new folder")
        }
        do {
            for (path, text) in Self.files {
                let url = folder.appendingPathComponent(path)
                try manager.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(text.utf8).write(to: url)
            }
            try Data(ContractJSONSchema.render().utf8).write(to: folder.appendingPathComponent(ContractJSONSchema.fileName))
        } catch {
            FileHandle.standardError.write(Data("error: cannot write \(directory): \(error.localizedDescription)\n".utf8))
            throw ExitCode(2)
        }
        // The first release: what `contractc check` compares every later version with.
        let loaded = ContractCompiler.load(directory: folder.path)
        guard let set = loaded.contracts, !loaded.diagnostics.hasErrors else {
            report(loaded.diagnostics, format: .text)
            throw ExitCode(1)
        }
        let (summary, diagnostics) = ContractCompiler.lock(set, lockPath: ContractCompiler.defaultLockPath(contracts: folder.path))
        report(diagnostics, format: .text)
        guard let summary else { throw ExitCode(1) }
        print("Started \(directory): \(summary.newVersions.joined(separator: ", ")) released in contracts.lock. See its README.md.")
    }

    /// The new set's files, by path in its folder.
    static let files: [(String, String)] = [
        (
            "contracts.yaml",
            """
            # yaml-language-server: $schema=contract.schema.json
            # The manifest: the sync scopes and the compatibility rules `contractc check` applies to new
            # versions.
            doc: The contracts of a new app.

            scopes:
              team:
                key: "team:{team_id}"
                doc: The rows of one team (a team of the device's token), read and written by its members.

            compatibility:
              entities: full      # backward and forward across the supported window
              events: backward    # the server must read every event any supported device can send

            """
        ),
        (
            "entities/note.yaml",
            """
            # yaml-language-server: $schema=../contract.schema.json
            entity: Note
            summary: A note a team member writes, offline or online.
            version: 1
            table: notes
            scope: team
            sync: { direction: both, conflict: last_writer_wins, tombstones: true, priority: normal }

            fields:
              id: { type: id, primary_key: true }
              team_id: { type: id, doc: "The team whose scope holds the row; fills {team_id} in the scope key." }
              title: { type: string, max_length: 200 }
              body: { type: string?, max_length: 10000 }
              updated_at: { type: timestamp, version_field: true }

            """
        ),
        (
            "events/note_pinned.yaml",
            """
            # yaml-language-server: $schema=../contract.schema.json
            event: NotePinned
            summary: A team member pinned a note for the team; append-only.
            version: 1
            scope: team

            fields:
              team_id: { type: id, doc: "The team whose scope holds the row; fills {team_id} in the scope key." }
              note_id: ref<Note>

            """
        ),
        (
            "README.md",
            """
            # Contracts

            The entities and events this app syncs, in YAML: `contracts.yaml` (the scopes and the
            compatibility rules), `entities/` and `events/`. `contracts.lock` records every released
            version; `contract.schema.json` lets an editor complete and check the files.

            - `contractc check --contracts .`: the contracts are valid and every change stays compatible
              with the versions in `contracts.lock` (run it in CI).
            - `contractc generate --contracts . --output ../Sources/Contracts`: the DTOs, the SQLite
              migrations and the registry (`ContractRegistry`) that the client and server engines take.
            - `contractc lock --contracts .`: release the current versions, once the app ships them.

            To change a contract, raise its `version`, say `since:` on new fields, and let
            `contractc check` say what else the change needs.

            """
        ),
    ]
}
