import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient

struct CacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "What the device keeps for offline use: list, delete one unit, or clear everything.",
        subcommands: [CacheListCommand.self, CacheDeleteCommand.self, CacheClearCommand.self],
        defaultSubcommand: CacheListCommand.self
    )
}

struct CacheListCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Every unit with its offline status, size and use, and the storage totals.",
        discussion: """
            A unit is `downloaded` (every file on the device, verified), `partial` (an interrupted download, or \
            files added since), `not_downloaded`, or `expired`. Units with changes not yet on the server are \
            never evicted.
            """
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let units = try session.store.cachedUnits()
        let totals = try session.store.cacheTotals()
        if output.json {
            Console.json(.object(["units": .array(units.map(Self.json)), "totals": Self.json(totals)]))
            return
        }
        let now = session.clock.now()
        for unit in units {
            var notes: [String] = []
            if let opened = unit.lastOpenedAt { notes.append("opened \(Wording.age(of: opened, now: now))") }
            if unit.isCompleted { notes.append("completed") }
            if let expires = unit.expiresAt { notes.append("expires \(expires.iso8601)") }
            if unit.hasUnsyncedWrites { notes.append("changes waiting: never evicted") }
            Console.say(
                "\(unit.id)  \(unit.title ?? "(deleted on the server)")  \(unit.status.rawValue)  "
                    + "\(Wording.bytes(unit.bytesOnDisk)) of \(Wording.bytes(unit.bytesTotal)), "
                    + "\(unit.downloadedFileCount)/\(Wording.count(unit.fileCount, "file"))"
                    + (notes.isEmpty ? "" : "  (" + notes.joined(separator: ", ") + ")")
            )
        }
        Console.say(CacheTotalsLine.text(totals))
    }

    static func json(_ unit: CachedUnit) -> JSONValue {
        .object([
            "id": .string(unit.id), "title": unit.title.map(JSONValue.string) ?? .null, "status": .string(unit.status.rawValue),
            "bytes_on_disk": .int(unit.bytesOnDisk), "bytes_total": .int(unit.bytesTotal),
            "file_count": .int(Int64(unit.fileCount)), "downloaded_file_count": .int(Int64(unit.downloadedFileCount)),
            "added_at": unit.addedAt.json, "downloaded_at": unit.downloadedAt.json, "last_opened_at": unit.lastOpenedAt.json,
            "expires_at": unit.expiresAt.json, "is_completed": .bool(unit.isCompleted),
            "has_unsynced_writes": .bool(unit.hasUnsyncedWrites),
        ])
    }

    static func json(_ totals: CacheTotals) -> JSONValue {
        .object([
            "units": .int(Int64(totals.units)), "downloaded_units": .int(Int64(totals.downloadedUnits)),
            "files": .int(Int64(totals.files)), "files_bytes": .int(totals.bytesOnDisk),
            "database_bytes": .int(totals.databaseBytes), "total_bytes": .int(totals.bytesOnDisk + totals.databaseBytes),
        ])
    }
}

struct CacheDeleteCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete one unit from the device: its subscription, rows and files.",
        discussion: """
            Changes waiting in the queue (progress of its lessons, answers) stay queued and are still sent, \
            and the rows they change stay until then. A device that syncs the content scope whole keeps the \
            unit in its catalogue, not downloaded. Exits 6 when the device keeps nothing of the unit.
            """
    )

    @Argument(help: "The unit's id (`sync-device cache list` lists them).")
    var unit: String

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let freed = try session.store.cachedUnits().first { $0.id == unit }?.bytesOnDisk ?? 0
        try session.store.deleteCachedUnit(id: unit)
        Console.say("deleted \(unit) from the device (\(Wording.bytes(freed)) of files)")
    }
}

struct CacheClearCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear",
        abstract: "Delete every unit, lesson and file from the device.",
        discussion: "Ends every unit's subscription and deletes every file; changes waiting in the queue stay queued and are still sent."
    )

    @OptionGroup var device: DeviceOptions

    func execute() async throws {
        let session = try device.session()
        let before = try session.store.cacheTotals()
        try session.store.clearCache()
        Console.say(
            "cleared the cache: \(Wording.count(before.units, "unit")) and \(Wording.bytes(before.bytesOnDisk)) of files; "
                + "queued changes are kept"
        )
    }
}

/// How `status` and `cache list` word the storage totals.
enum CacheTotalsLine {
    static func text(_ totals: CacheTotals) -> String {
        let files = "files \(Wording.bytes(totals.bytesOnDisk))"
        return "storage: \(Wording.bytes(totals.bytesOnDisk + totals.databaseBytes)) (database \(Wording.bytes(totals.databaseBytes)), "
            + "\(files); \(totals.downloadedUnits) of \(Wording.count(totals.units, "unit")) downloaded)"
    }
}
