import ContractRuntime
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncProtocol
import Testing

@testable import SyncServer

/// The file routes over HTTP, as a device speaks them: declare, send in pieces, ask the offset,
/// download whole and by range; the headers of the protocol and its refusals.
@Suite("File routes")
struct FileRouteTests {
    static let offset = HTTPField.Name(FileRoutes.uploadOffset)!

    @Test("declare, send in two pieces, ask the offset between, then download whole, by range and not as another user")
    func roundTrip() async throws {
        let h = try RouteHarness()
        let bytes = FileServiceTests.bytes(70_000, seed: 3)
        let reference = try FileServiceTests.reference(bytes)
        let alice = h.token(user: "alice"), bob = h.token(user: "bob", device: "d-2")
        try await h.test { client in
            let declared = try await client.execute(
                uri: FileRoutes.files, method: .post, headers: h.headers(alice, [.contentType: "application/json"]),
                body: try ByteBuffer(json: FileUploadRequest(reference)))
            #expect(declared.status == .created)
            let answer = try JSONDecoder().decode(FileUploadAnswer.self, from: declared.data)
            let id = try #require(answer.uploadID)
            #expect(declared.headers[.location] == FileRoutes.upload(id) && declared.headers[Self.offset] == "0")

            func send(_ part: Data, at offset: Int, type: String = FileRoutes.offsetContentType) async throws -> TestResponse {
                try await client.execute(
                    uri: FileRoutes.upload(id), method: .patch,
                    headers: h.headers(alice, [.contentType: type, Self.offset: String(offset)]), body: ByteBuffer(bytes: part))
            }
            let first = try await send(bytes.prefix(30_000), at: 0)
            #expect(first.status == .noContent && first.headers[Self.offset] == "30000")
            let head = try await client.execute(uri: FileRoutes.upload(id), method: .head, headers: h.headers(alice))
            #expect(head.status == .ok && head.headers[Self.offset] == "30000")
            // An overlapping piece: 409 with where the upload stands.
            let overlap = try await send(bytes.prefix(10), at: 29_990)
            #expect(overlap.status == .conflict && overlap.headers[Self.offset] == "30000")
            #expect(try overlap.errorBody().code == .offsetMismatch)
            let wrongType = try await send(bytes.suffix(from: 30_000), at: 30_000, type: "application/json")
            #expect(wrongType.status == .unsupportedMediaType)
            let last = try await send(bytes.suffix(from: 30_000), at: 30_000)
            #expect(last.status == .noContent && last.headers[Self.offset] == "70000" && last.headers[.eTag] == "\"\(reference.sha256)\"")

            let whole = try await client.execute(uri: FileRoutes.file(reference.sha256), method: .get, headers: h.headers(alice))
            #expect(whole.status == .ok && whole.data == bytes && whole.headers[.contentType] == "application/octet-stream")
            let range = try await client.execute(
                uri: FileRoutes.file(reference.sha256), method: .get, headers: h.headers(alice, [.range: "bytes=65000-"]))
            #expect(range.status == .partialContent && range.data == bytes.suffix(from: 65_000))
            #expect(range.headers[.contentRange] == "bytes 65000-69999/70000")
            let past = try await client.execute(
                uri: FileRoutes.file(reference.sha256), method: .get, headers: h.headers(alice, [.range: "bytes=70000-"]))
            #expect(past.status == .rangeNotSatisfiable)
            // Bob knows the hash, not the file: 404 as for one that does not exist, and so is the upload.
            let other = try await client.execute(uri: FileRoutes.file(reference.sha256), method: .get, headers: h.headers(bob))
            #expect(other.status == .notFound)
            let unknown = try await client.execute(uri: FileRoutes.file(String(repeating: "0", count: 64)), method: .get, headers: h.headers(alice))
            #expect(unknown.status == .notFound)
            // Declared again once stored: nothing to send.
            let again = try await client.execute(
                uri: FileRoutes.files, method: .post, headers: h.headers(alice, [.contentType: "application/json"]),
                body: try ByteBuffer(json: FileUploadRequest(reference)))
            let state = try JSONDecoder().decode(FileUploadAnswer.self, from: again.data).state
            #expect(again.status == .ok && state == .stored)
        }
    }

    @Test("an abandoned upload is gone, and what it held")
    func abandon() async throws {
        let h = try RouteHarness()
        let bytes = FileServiceTests.bytes(5_000, seed: 8)
        let token = h.token(user: "alice")
        try await h.test { client in
            let declared = try await client.execute(
                uri: FileRoutes.files, method: .post, headers: h.headers(token, [.contentType: "application/json"]),
                body: try ByteBuffer(json: FileUploadRequest(try FileServiceTests.reference(bytes))))
            let id = try #require(try JSONDecoder().decode(FileUploadAnswer.self, from: declared.data).uploadID)
            _ = try await client.execute(
                uri: FileRoutes.upload(id), method: .patch,
                headers: h.headers(token, [.contentType: FileRoutes.offsetContentType, Self.offset: "0"]), body: ByteBuffer(bytes: bytes.prefix(100)))
            let gone = try await client.execute(uri: FileRoutes.upload(id), method: .delete, headers: h.headers(token))
            #expect(gone.status == .noContent)
            let head = try await client.execute(uri: FileRoutes.upload(id), method: .head, headers: h.headers(token))
            #expect(head.status == .notFound)
        }
    }
}
