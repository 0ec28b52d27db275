import ContractRuntime
import Crypto
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// Files through a real `sync-server` process: killed with SIGKILL while it receives a file, at
/// seeded random offsets, and a file far larger than its memory sent and read back whole. Part
/// of the crash suite, so it runs one test at a time with the other kills rather than beside them.
extension CrashTests {
    @Test(
        "kill -9 of the server while it receives a file, at random offsets: the upload resumes where it stands, and the file is stored once, whole, never served before"
    )
    func serverKilledWhileReceiving() async throws {
        var plan = CrashPlan("server killed while receiving a file", iterations: 5)
        var tally = KillTally(plan)
        let stage = try Stage()
        let server = stage.server
        let token = try server.token(user: "u-1", device: "uploader")
        let size = 16 << 20
        let bytes = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &plan.random) })
        let reference = try FileTransfers.reference(of: bytes)
        let upload = try await FileTransfers.declare(reference, server, token: token)

        var offset = 0
        for _ in 0..<plan.iterations {
            let port = try #require(server.port)
            // Part of the rest, then nothing: the server dies waiting for the remainder of the body.
            let cut = plan.int(1...min(size - offset - 1, 4 << 20))
            let head =
                "PATCH \(FileRoutes.upload(upload)) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                + "Content-Type: \(FileRoutes.offsetContentType)\r\n\(FileRoutes.uploadOffset): \(offset)\r\nContent-Length: \(size - offset)\r\n\r\n"
            let (from, part) = (offset, bytes[offset..<offset + cut])
            let socket = try await RawHTTP.onOwnThread {
                let descriptor = try RawHTTP.connect(port: port)
                RawHTTP.send(head, on: descriptor)
                RawHTTP.send(bytes: part, on: descriptor)
                return descriptor
            }
            // The server keeps what it received a piece (1 MiB) at a time: with a piece's worth
            // sent, wait (at most 3 s) until it holds some of it, then a random moment more.
            if cut > 1 << 20 {
                for _ in 0..<60 {
                    let asked = try await FileTransfers.http(server, "HEAD", FileRoutes.upload(upload), token: token)
                    if let held = asked.headers[FileRoutes.uploadOffset.lowercased()].flatMap(Int.init), held > from { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            try await Task.sleep(for: .milliseconds(plan.int(0...200)))
            let early = try await FileTransfers.http(server, "GET", FileRoutes.file(reference.sha256), token: token)
            #expect(early.status == 404, "an unfinished file is never served")
            try server.crash()
            close(socket)
            try server.start()
            let asked = try await FileTransfers.http(server, "HEAD", FileRoutes.upload(upload), token: token)
            let kept = try #require(asked.headers[FileRoutes.uploadOffset.lowercased()].flatMap(Int.init))
            #expect(kept >= from && kept <= from + cut, "sent \(from)..<\(from + cut), the server holds \(kept)")
            tally.record(kept > from ? "mid-body, part kept" : "mid-body, nothing new kept")
            offset = kept
        }
        let last = try await FileTransfers.http(
            server, "PATCH", FileRoutes.upload(upload), token: token,
            headers: ["Content-Type": FileRoutes.offsetContentType, FileRoutes.uploadOffset: String(offset)], body: bytes.suffix(from: offset))
        #expect(last.status == 204 && last.headers["etag"] == "\"\(reference.sha256)\"")
        let whole = try await FileTransfers.http(server, "GET", FileRoutes.file(reference.sha256), token: token)
        #expect(whole.status == 200 && whole.body == bytes)
        // Stored once, no staging left behind.
        let files = server.data.appendingPathComponent("files")
        let stored = FileManager.default.enumerator(at: files.appendingPathComponent("blobs"), includingPropertiesForKeys: nil)?
            .compactMap { ($0 as? URL)?.lastPathComponent }.filter { $0 == reference.sha256 }
        #expect(stored?.count == 1)
        #expect((try? FileManager.default.contentsOfDirectory(atPath: files.appendingPathComponent("uploads").path)) ?? [] == [])
        tally.report()
    }

    @Test("a file far larger than the server's memory goes up in pieces and comes back whole, the server's memory flat in its size")
    func largeFileMemoryFlat() async throws {
        // 256 MiB in `make test`, beside the other suites; 1 GiB in `make soak`.
        let megabytes = ProcessInfo.processInfo.environment["OUTPOST_LARGE_FILE_MIB"].flatMap(Int.init) ?? 256
        let stage = try Stage()
        let server = stage.server
        let token = try server.token(user: "u-1", device: "uploader")
        var random = SeededRandom(seed: 46)
        let block = Data((0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &random) })
        var bytes = Data(capacity: megabytes << 20)
        for index in 0..<megabytes {
            // Each MiB its own (its first bytes say which), so a piece out of place changes the hash.
            var mebibyte = block
            withUnsafeBytes(of: UInt32(index).littleEndian) { mebibyte.replaceSubrange(0..<4, with: $0) }
            bytes.append(mebibyte)
        }
        let reference = try FileTransfers.reference(of: bytes)
        let upload = try await FileTransfers.declare(reference, server, token: token)
        _ = try await FileTransfers.http(server, "GET", "/health", token: token)
        let before = try #require(server.memoryKiB("VmRSS"))
        #expect(server.resetPeakMemory(), "the kernel lets the peak be reset")

        // Sent as a device sends a large file: pieces of 64 MiB, one request each.
        let piece = 64 << 20
        var offset = 0
        while offset < bytes.count {
            let part = bytes[offset..<min(bytes.count, offset + piece)]
            let sent = try await FileTransfers.http(
                server, "PATCH", FileRoutes.upload(upload), token: token,
                headers: ["Content-Type": FileRoutes.offsetContentType, FileRoutes.uploadOffset: String(offset)], body: Data(part))
            #expect(sent.status == 204)
            offset += part.count
        }
        let whole = try await FileTransfers.http(server, "GET", FileRoutes.file(reference.sha256), token: token)
        #expect(whole.status == 200 && whole.body.count == bytes.count && whole.body == bytes)
        let peak = try #require(server.memoryKiB("VmHWM"))
        // Flat: the peak over the upload and the download is the resident size before plus a few
        // pieces in flight, never the file's size.
        #expect(peak - before < 200 * 1024, "resident \(before) KiB before, peak \(peak) KiB for a \(megabytes) MiB file")
        print("files: a \(megabytes) MiB file up and down: server resident \(before) KiB before, peak \(peak) KiB")
    }
}

/// The file routes as the crash suite speaks them to a `sync-server` process.
enum FileTransfers {
    /// `method path` with `headers` and a raw body, to the running server.
    static func http(
        _ server: SyncServerProcess, _ method: String, _ path: String, token: String, headers: [String: String] = [:], body: Data? = nil
    ) async throws -> BearerRequest.Answer {
        try await BearerRequest.send(method, path, to: try server.url, token: token, headers: headers, body: body)
    }

    static func declare(_ reference: FileReference, _ server: SyncServerProcess, token: String) async throws -> String {
        let declared = try await http(
            server, "POST", FileRoutes.files, token: token, headers: ["Content-Type": "application/json"],
            body: try JSONEncoder().encode(FileUploadRequest(reference)))
        #expect(declared.status == 201, "\(String(decoding: declared.body, as: UTF8.self))")
        return try #require(try JSONDecoder().decode(FileUploadAnswer.self, from: declared.body).uploadID)
    }

    static func reference(of bytes: Data) throws -> FileReference {
        try FileReference(
            sha256: SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined(), byteCount: Int64(bytes.count),
            contentType: "application/octet-stream")
    }

}
