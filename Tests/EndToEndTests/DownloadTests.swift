import Foundation
import OutpostTestSupport
import SyncServer
import Testing

/// `download`, `cache` and the files of `open`, with the real binaries.
@Suite("Downloads and the cache", .serialized, .blockingWork)
struct DownloadTests {
    static let unit = "unit-battery-basics"

    @Test("a learner downloads a unit, opens a lesson offline from local files, then deletes it (its files left to the file cache)")
    func downloadOpenOfflineAndDelete() async throws {
        let stage = try Stage()
        let phone = try stage.device("phone", user: "learner-1")
        let before = try phone.json(["cache", "list"])
        let listed = try #require(before["units"].array.first { $0["id"].string == Self.unit })
        #expect(listed["status"].string == "not_downloaded")
        #expect(listed["file_count"].int == 4)

        let download = try phone.json(["download", Self.unit])
        #expect(download["files"].int == 4, "\(download)")
        #expect(download["title"].string == "Battery swap basics")
        let bytes = try #require(download["bytes"].int)
        #expect(bytes == listed["bytes_total"].int)
        #expect(try phone.run(["download", Self.unit]).stdout.contains("4 files"))

        let cached = try phone.json(["cache", "list"])
        let unit = try #require(cached["units"].array.first { $0["id"].string == Self.unit })
        #expect(unit["status"].string == "downloaded")
        #expect(unit["bytes_on_disk"].int == bytes)
        #expect(unit["downloaded_file_count"].int == 4)
        #expect(cached["totals"]["files_bytes"].int == bytes)
        #expect(try phone.json(["status"])["storage"]["files_bytes"].int == bytes)

        try phone.ok(["offline", "on"])
        let lesson = try phone.json(["open", "lesson-battery-anatomy"])
        let files = lesson["assets"].array
        #expect(files.count == 2)
        for file in files {
            let url = try #require(file["file"].string.flatMap(URL.init(string:)), "\(file)")
            #expect(url.isFileURL)
            let data = try Data(contentsOf: url)
            #expect(Hex.sha256(data) == file["asset"]["checksum"].string)
        }
        let opened = try phone.json(["cache", "list"])["units"].array.first { $0["id"].string == Self.unit }
        #expect(opened?["last_opened_at"].isNull == false, "open marks the unit opened")

        // Offline, another unit cannot be downloaded; the lesson of a unit not downloaded names no file.
        let offline = try phone.run(["download", "unit-field-reporting"])
        #expect(offline.status == 3, "\(offline)")
        #expect(offline.stderr.contains("not available offline"), "\(offline)")
        let remote = try phone.json(["open", "lesson-reporting-offline"])
        #expect(remote["assets"][0]["file"].isNull)

        // The download was a `unit` subscription (opening the other unit's lesson made one too);
        // deleting the unit ends it. The phone syncs the content scope whole, so the unit stays in
        // its catalogue, not downloaded; its files stay in the engine's file cache until it evicts them.
        func subscribedUnits() throws -> Set<String> {
            Set(try phone.json(["subscriptions"])["subscriptions"].array.compactMap { $0["parameters"]["id"].string })
        }
        #expect(try subscribedUnits() == [Self.unit, "unit-field-reporting"])
        try phone.ok(["cache", "delete", Self.unit])
        let deleted = try phone.json(["cache", "list"])
        let kept = try #require(deleted["units"].array.first { $0["id"].string == Self.unit })
        #expect(kept["status"].string == "not_downloaded" && kept["bytes_on_disk"].int == bytes)
        #expect(deleted["totals"]["files_bytes"].int == bytes)
        #expect(try subscribedUnits() == ["unit-field-reporting"])
        try phone.ok(["offline", "off"])
        try phone.ok(["download", Self.unit])
        try phone.ok(["cache", "clear"])
        let cleared = try phone.json(["cache", "list"])
        #expect(cleared["units"].array.allSatisfy { $0["status"].string == "not_downloaded" })
        #expect(try phone.json(["subscriptions"])["subscriptions"].array.isEmpty)
        // Changes queued meanwhile (the lessons opened) are kept and delivered.
        try phone.ok(["sync"])
        try stage.server.stop()
        try await stage.expectEveryWriteOnceOnServer(phone)
    }

    @Test("unknown units, a device offline and a file that does not match its checksum end with their exit codes")
    func downloadFailures() async throws {
        let stage = try Stage()
        let phone = try stage.device("phone", user: "learner-1")

        let unknown = try phone.run(["download", "unit-nowhere"])
        #expect(unknown.status == 6, "\(unknown)")
        #expect(unknown.stderr.contains("the server lists no unit 'unit-nowhere'"), "\(unknown)")
        let notCached = try phone.run(["cache", "delete", "unit-nowhere"])
        #expect(notCached.status == 6, "\(notCached)")

        // The server's copy of a file damaged on its disk (its blob store, the data folder's
        // `files/blobs/<tenant>/<ab>/<sha256>`): the download is refused, never kept.
        let anatomy = try phone.json(["open", "lesson-battery-anatomy"])
        let name = try #require(anatomy["assets"].array.first { $0["asset"]["id"].string == "asset-battery-diagram" }?["asset"]["checksum"].string)
        let blobs = stage.server.data.appendingPathComponent("files/blobs")
        let stored = try #require(
            FileManager.default.enumerator(atPath: blobs.path)?.compactMap { $0 as? String }.first { $0.hasSuffix(name) }
                .map { blobs.appendingPathComponent($0) })
        var bytes = try Data(contentsOf: stored)
        bytes[bytes.startIndex] ^= 0xFF
        try bytes.write(to: stored)
        let damaged = try phone.run(["download", Self.unit])
        #expect(damaged.status == 3, "\(damaged)")
        #expect(damaged.stderr.contains("hashes to"), "\(damaged)")
        #expect(damaged.stderr.contains("help:"), "\(damaged)")
        let unit = try phone.json(["cache", "list"])["units"].array.first { $0["id"].string == Self.unit }
        // The file downloaded before it is kept; the unit is partly on the device.
        #expect(unit?["status"].string == "partial", "\(String(describing: unit))")
        #expect(unit?["downloaded_file_count"].int == 1)
    }
}
