import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient

struct DownloadCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: "Download a unit with its lessons and files, for offline use.",
        discussion: """
            Subscribes to the unit (the contracts' `unit` subscription: the unit, its lessons and their asset \
            rows, listed by `sync-device subscriptions`), syncs it, and downloads every file its asset rows name \
            that the device lacks (the engine's files: `GET /sync/v1/files/{sha256}` in ranges, each verified by \
            SHA-256, kept in the store's file cache); files already on the device are kept. An interrupted \
            download resumes where it stopped. A progress bar is drawn on standard error when it is a terminal. \
            Exits 6 when the server lists no such unit, 3 when the device is offline or a file does not match \
            its checksum (the file is deleted).
            """
    )

    @Argument(help: "The unit's id (`sync-device units` lists them).")
    var unit: String

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        let drawsProgress = Console.standardErrorIsTerminal
        let result = try await session.engine().downloadUnit(id: unit) { progress in
            if drawsProgress { Console.redraw(Self.bar(progress)) }
        }
        if drawsProgress { Console.redraw("") }
        let title = try session.store.fetch(Contracts.Unit.self, id: unit)?.title
        if output.json {
            Console.json(
                .object([
                    "unit_id": .string(result.unitId), "title": title.map(JSONValue.string) ?? .null,
                    "files": .int(Int64(result.files)), "bytes": .int(result.bytes),
                ]))
            return
        }
        Console.say(
            "downloaded \(result.unitId)" + (title.map { " (\($0))" } ?? "")
                + ": \(Wording.count(result.files, "file")), \(Wording.bytes(result.bytes)), verified; available offline"
        )
    }

    /// `[############------------] 2/4 files  1.2 MB of 3.4 MB  asset-battery-diagram`
    static func bar(_ progress: UnitDownloadProgress) -> String {
        let filled = Int(progress.fraction * 24)
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: 24 - filled)
        return "[\(bar)] \(progress.filesDone)/\(progress.filesTotal) files  "
            + "\(Wording.bytes(progress.bytesDone)) of \(Wording.bytes(progress.bytesTotal))  \(progress.currentAssetId ?? "")"
    }
}
