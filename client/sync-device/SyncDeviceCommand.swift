import ArgumentParser

@main
struct SyncDeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-device",
        abstract: "A command-line device built on the SyncClient library: one --home folder is one device.",
        discussion: """
            Every command works on the device in --home DIR (or $OUTPOST_HOME).
            Reads come from the device's SQLite store; writes are stored and
            queued at once, online or not, and reach the server on `sync`.
            Read commands take --json.

            Quick start:
              sync-device login --home ./tablet --server URL --token TOKEN
              sync-device sync --home ./tablet
              sync-device tasks --home ./tablet
              sync-device download UNIT --home ./tablet  # for offline use
              sync-device offline on --home ./tablet   # no network
              sync-device task complete TASK_ID --home ./tablet
              sync-device offline off --home ./tablet  # back: it syncs

            Any entity of the contracts, named as in its contract or by its
            table (ServiceAsset, service-asset, service_assets):
              sync-device rows service-asset --where category=charger
              sync-device create service-asset --field asset_tag=CHG-9 \\
                  --field display_name="Charger 9" --field category=charger
              sync-device show service-asset ID
              sync-device edit service-asset ID --field status=needs_service
              sync-device delete service-asset ID

            Files of `file` fields (uploaded before the change that names
            them, downloaded on demand, checked against their SHA-256):
              sync-device event issue-logged --field photo_file=@shot.jpg …
              sync-device attach ENTITY ID FIELD shot.jpg
              sync-device file issue-logged EVENT_ID photo_file --out shot.jpg

            Exit codes:
              0   success
              1   the device failed (its database or files)
              2   not logged in, or the home folder's state does not allow
                  it (another user, a newer build's database, unsynced
                  changes at logout, no attempt in progress, a row that
                  already exists)
              3   the network or the server failed (offline, unreachable,
                  refused, or a downloaded file did not match its checksum)
              4   sync finished, but conflicts, refused or quarantined
                  changes wait for you (`sync-device conflicts`, `outbox`)
              5   writes are paused: changes older than 14 days have not
                  reached the server; sync first
              6   no such unit, lesson, assessment, question, row, conflict
                  or queued change; no file in the field, or none on the
                  server for this user
              7   a file refused for its field before anything was queued:
                  larger than the field allows, of a type it does not
                  accept, or bytes not of the type declared
              66  a file to attach cannot be read
              64  usage: an unknown command, flag, entity or field, a value
                  that does not fit its type, a missing required field, or
                  a write the contract does not let devices make
            """,
        subcommands: [
            LoginCommand.self, LogoutCommand.self, StatusCommand.self, SyncCommand.self, OfflineCommand.self,
            UnitsCommand.self, DownloadCommand.self, CacheCommand.self, OpenCommand.self, AnswerCommand.self, SubmitCommand.self,
            AttemptsCommand.self,
            TasksCommand.self, TaskCommand.self, IncidentsCommand.self,
            RowsCommand.self, ShowCommand.self, SubscribeCommand.self, SubscriptionsCommand.self, UnsubscribeCommand.self, CreateCommand.self,
            EditCommand.self, DeleteCommand.self, EventCommand.self, AttachCommand.self, FileCommand.self,
            ConflictsCommand.self, ResolveCommand.self, OutboxCommand.self, PreferencesCommand.self, WatchCommand.self, KeysCommand.self,
        ]
    )
}
