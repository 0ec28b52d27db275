import ContractRuntime
import Foundation
import InspectionClient
import InspectionContracts
import SyncClient
import SyncProtocol
import Testing

/// A finding's photo (`Finding.photo`, a `file` field) through the example's own server on each
/// database: the tablet that reports the finding uploads the photo before the row; the crew's
/// other tablet pulls the row with the photo's reference and downloads the bytes when it opens
/// it; anyone else, who knows the photo's hash, gets 404; the inspector's export lists the file,
/// and their erasure leaves the photo a crew's finding names.
@Suite struct InspectionFileTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    /// `count` bytes that begin as a JPEG does.
    static func jpeg(_ count: Int) -> Data {
        Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data((0..<(count - 4)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
    }

    @Test(arguments: ServerDatabase.allCases)
    func aFindingsPhotoTravelsApartFromItsRow(database: ServerDatabase) async throws {
        let server = try InspectionServerProcess(database)
        try server.start()
        defer { try? server.stop() }
        let a = try TestTablet(server, user: "inspector-a", device: "tablet-a", clock: ManualClock(Self.start))
        let b = try TestTablet(server, user: "inspector-b", device: "tablet-b", clock: ManualClock(Self.start))

        let bytes = Self.jpeg(300_000)
        let picked = a.folder.appendingPathComponent("weld.jpg")
        try bytes.write(to: picked)
        let started = try a.tablet.startInspection(site: "Pump station 4", checklist: ["Welds sound"])
        let finding = try a.tablet.reportFinding(
            on: started.id, item: started.items[0], title: "Cracked weld", severity: .high, photo: picked)
        // A photo of a type the contract does not take is refused at the write, nothing queued.
        let pdf = a.folder.appendingPathComponent("scan.pdf")
        try Data("%PDF-1.7\n".utf8).write(to: pdf)
        #expect(throws: OfflineStoreError.self) {
            _ = try a.tablet.reportFinding(on: started.id, title: "A scan", photo: pdf, photoType: "application/pdf")
        }
        #expect(try a.tablet.findings(of: started.id).count == 1)
        await a.sync()
        #expect(try a.store.outboxCounts().needingAttention == 0)

        // B pulls the finding with the photo's reference, not its bytes, and downloads them when it opens it.
        await b.sync()
        let pulled = try #require(try b.store.fetch(Finding.self, id: finding))
        let photo = try #require(pulled.photo)
        #expect(photo.byteCount == Int64(bytes.count) && photo.contentType == "image/jpeg" && photo.name == "weld.jpg")
        #expect(try b.store.localFile(for: photo) == nil)
        let opened = try #require(try await b.tablet.photo(of: pulled))
        #expect(try Data(contentsOf: opened) == bytes)

        // Knowing the hash does not lend the file: a stranger to the crew gets 404.
        let visitor = try server.token(user: "visitor", device: "phone-v", teams: [])
        #expect(try await server.send("GET", FileRoutes.file(photo.sha256), token: visitor).status == 404)
        let member = try server.token(user: "inspector-b", device: "tablet-b")
        #expect(try await server.send("GET", FileRoutes.file(photo.sha256), token: member).status == 200)

        // The inspector's export lists the photo; erasing the inspector keeps it for the crew.
        let office = try server.token(user: "office", device: "console", admin: true, teams: [])
        let export = try await server.send("GET", "/admin/v1/users/inspector-a/export", token: office)
        #expect(export.status == 200)
        #expect(export.body.split(separator: "\n").contains { $0.contains(#""type":"file""#) && $0.contains(photo.sha256) })
        let erased = try await server.send("DELETE", "/admin/v1/users/inspector-a", token: office)
        #expect(erased.status == 200, "\(erased.body)")
        #expect(erased.body.contains(#""files_deleted":0"#), "\(erased.body)")
        #expect(try await server.send("GET", FileRoutes.file(photo.sha256), token: member).status == 200)
    }
}
