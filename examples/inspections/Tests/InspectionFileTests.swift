import ContractRuntime
import Crypto
import Foundation
import InspectionContracts
import OutpostTestSupport
import SyncProtocol
import SyncServer
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A finding's photo (`Finding.photo`, a `file` field) on a real server of the example's own
/// contracts, on each storage, over loopback HTTP: a push naming a photo the server lacks is
/// refused whole; once uploaded, the finding is taken and every member of the crew may download
/// the photo, while anyone else (who knows its hash) gets 404; housekeeping keeps a photo a row
/// names.
@Suite struct InspectionFileTests {
    static let crew = InspectionServerHarness.crew

    /// `method path` with `headers` and a raw body, to the running server.
    static func request(
        _ server: InspectionServerHarness, _ method: String, _ path: String, token: String, headers: [String: String] = [:], body: Data? = nil
    ) async throws -> BearerRequest.Answer {
        try await BearerRequest.send(method, path, to: server.url, token: token, headers: headers, body: body)
    }

    static func push(_ server: InspectionServerHarness, token: String, photo: FileReference) async throws -> (status: Int, body: Data) {
        let mutation = Mutation(
            seq: 1, clientMutationId: "01J0000000000000000000F001", entity: "Finding", op: .create, id: "finding-1",
            payload: .object([
                "id": .string("finding-1"), "team_id": .string(crew), "inspection_id": .string("insp-1"), "title": .string("Cracked weld"),
                "severity": .string("high"), "revision": .int(0), "photo": photo.json,
            ]))
        let body = try JSONEncoder().encode(PushRequest(clientId: "tablet-a-stream", schema: ["Finding": 2], mutations: [mutation]))
        let answer = try await request(server, "POST", "/sync/v1/push", token: token, headers: ["Content-Type": "application/json"], body: body)
        return (answer.status, answer.body)
    }

    @Test(arguments: StorageKind.allCases)
    func aFindingsPhotoTravelsApartFromItsRow(storage: StorageKind) async throws {
        try await InspectionServerHarness.run(on: storage) { server in
            let bytes = Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data((0..<39_996).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
            let photo = try FileReference(
                sha256: SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined(), byteCount: Int64(bytes.count),
                contentType: "image/jpeg", name: "weld.jpg")
            let a = server.token(user: "inspector-a", device: "tablet-a")
            let b = server.token(user: "inspector-b", device: "tablet-b")
            let visitor = server.token(user: "visitor", device: "phone-v")

            // The photo is not on the server: the push is refused whole, naming it.
            let early = try await Self.push(server, token: a, photo: photo)
            #expect(early.status == 409, "\(String(decoding: early.body, as: UTF8.self))")
            let refusal = try JSONDecoder().decode(ErrorBody.self, from: early.body).error
            #expect(refusal.code == .fileMissing && refusal.details == .object(["files": .array([.string(photo.sha256)])]))

            // Uploaded in two pieces, then the same push is taken.
            let declared = try await Self.request(
                server, "POST", FileRoutes.files, token: a, headers: ["Content-Type": "application/json"],
                body: try JSONEncoder().encode(FileUploadRequest(photo)))
            #expect(declared.status == 201)
            let upload = try #require(try JSONDecoder().decode(FileUploadAnswer.self, from: declared.body).uploadID)
            for (offset, part) in [(0, bytes.prefix(25_000)), (25_000, bytes.suffix(from: 25_000))] {
                let sent = try await Self.request(
                    server, "PATCH", FileRoutes.upload(upload), token: a,
                    headers: ["Content-Type": FileRoutes.offsetContentType, FileRoutes.uploadOffset: String(offset)], body: Data(part))
                #expect(sent.status == 204)
            }
            let taken = try await Self.push(server, token: a, photo: photo)
            #expect(taken.status == 200, "\(String(decoding: taken.body, as: UTF8.self))")
            #expect(try JSONDecoder().decode(PushResponse.self, from: taken.body).results.map(\.status) == [.applied])

            // The crew's other inspector may read it (a row of the crew names it); a visitor may not.
            let downloaded = try await Self.request(server, "GET", FileRoutes.file(photo.sha256), token: b)
            #expect(downloaded.status == 200 && downloaded.body == bytes)
            let ranged = try await Self.request(server, "GET", FileRoutes.file(photo.sha256), token: b, headers: ["Range": "bytes=39000-"])
            #expect(ranged.status == 206 && ranged.body == bytes.suffix(from: 39_000))
            let stranger = try await Self.request(server, "GET", FileRoutes.file(photo.sha256), token: visitor)
            #expect(stranger.status == 404)
            // Naming it does not lend it: the visitor must send the bytes.
            let claimed = try await Self.request(
                server, "POST", FileRoutes.files, token: visitor, headers: ["Content-Type": "application/json"],
                body: try JSONEncoder().encode(FileUploadRequest(photo)))
            #expect(claimed.status == 201)

            // The row pulled by the other inspector carries the reference, not the bytes.
            let pulled = try await Self.request(server, "GET", "/sync/v1/pull?scope=crew", token: b)
            let page = try PullResponse(json: pulled.body)
            let row = try #require(page.upserts["Finding"]?.first)
            guard case .object(let fields) = row else { throw ExpectationFailedError() }
            #expect(try FileReference(json: fields["photo"] ?? .null) == photo)
            #expect(pulled.body.count < bytes.count)
        }
    }

    struct ExpectationFailedError: Error {}

    /// `count` bytes that begin as a PNG does, then `fill`.
    static func png(_ count: Int, fill: UInt8) -> Data {
        Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + Data(repeating: fill, count: count - 8)
    }

    /// Uploads `bytes` (a PNG) as `token`'s user in one piece; their reference.
    static func upload(_ bytes: Data, _ server: InspectionServerHarness, token: String) async throws -> FileReference {
        let reference = try FileReference(
            sha256: SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined(), byteCount: Int64(bytes.count), contentType: "image/png")
        let declared = try await request(
            server, "POST", FileRoutes.files, token: token, headers: ["Content-Type": "application/json"],
            body: try JSONEncoder().encode(FileUploadRequest(reference)))
        let upload = try #require(try JSONDecoder().decode(FileUploadAnswer.self, from: declared.body).uploadID)
        let sent = try await request(
            server, "PATCH", FileRoutes.upload(upload), token: token,
            headers: ["Content-Type": FileRoutes.offsetContentType, FileRoutes.uploadOffset: "0"], body: bytes)
        #expect(sent.status == 204)
        return reference
    }

    /// An inspector's export lists the files they uploaded; their erasure deletes those no row
    /// names, while the photo a crew's finding names stays for the crew.
    @Test(arguments: StorageKind.allCases)
    func exportAndErasure(storage: StorageKind) async throws {
        try await InspectionServerHarness.run(on: storage) { server in
            let a = server.token(user: "inspector-a", device: "tablet-a")
            let b = server.token(user: "inspector-b", device: "tablet-b")
            let office = server.token(user: "office", device: "console", isAdmin: true)
            let photo = try await Self.upload(Self.png(3_000, fill: 1), server, token: a)
            let draft = try await Self.upload(Self.png(2_000, fill: 2), server, token: a)
            let pushed = try await Self.push(server, token: a, photo: photo)
            #expect(pushed.status == 200)

            let export = try await server.send("GET", "/admin/v1/users/inspector-a/export", token: office)
            #expect(export.status == 200)
            let fileLines = export.body.split(separator: "\n").filter { $0.contains(#""type":"file""#) }
            #expect(fileLines.count == 2 && fileLines.contains { $0.contains(photo.sha256) } && fileLines.contains { $0.contains(draft.sha256) })

            let erased = try await server.send("DELETE", "/admin/v1/users/inspector-a", token: office)
            #expect(erased.status == 200, "\(erased.body)")
            #expect(erased.body.contains(#""files_deleted":1"#), "\(erased.body)")
            let kept = try await Self.request(server, "GET", FileRoutes.file(photo.sha256), token: b)
            #expect(kept.status == 200 && kept.body == Self.png(3_000, fill: 1))
            let admin = try await Self.request(server, "GET", FileRoutes.file(draft.sha256), token: office)
            #expect(admin.status == 404, "the draft no row named is gone")
        }
    }
}
