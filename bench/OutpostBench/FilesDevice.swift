import ContractRuntime
import Contracts
import Foundation
import SampleServerApps
import SyncClient
import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The device side of `files`, run as a child process of `outpost-bench` so that its peak
/// memory (VmHWM) is its own. Each mode does one transfer and prints one JSON line (a
/// ``Report``), or prints the problem on standard error and exits 1.
///
///     outpost-bench files-device upload --server URL --token TOKEN --folder DIR --source FILE
///     outpost-bench files-device upload-routes --server URL --token TOKEN --folder DIR --source FILE
///     outpost-bench files-device download --server URL --token TOKEN --folder DIR --sha256 HEX --size N
///     outpost-bench files-device download-routes --server URL --token TOKEN --folder DIR --sha256 HEX --size N
///     outpost-bench files-device raw-put --url URL --source FILE
///     outpost-bench files-device raw-get --url URL --folder DIR --size N [--token TOKEN]
///     outpost-bench files-device socket-put --url URL --source FILE
///     outpost-bench files-device socket-get --url URL --folder DIR --size N
///
/// - `upload`: a fresh ``OfflineStore``, `importFile(at:for:)` of the source for IssueLogged's
///   `photo_file` and an IssueLogged event naming it (timed apart), then one `syncNow()` of a
///   ``SyncEngine`` with no scope: the file uploaded (declare, `PATCH`es of
///   ``SyncEngineConfiguration/fileChunkBytes``, the server's hash check and promotion), then
///   the event pushed.
/// - `upload-routes`: for files past the contract's 25 MB: imported with no field, then the
///   same requests the engine sends, from the store's copy (``uploadThroughRoutes``).
/// - `download`: a fresh store, `engine.file(for:)` of the reference (ranged `GET`s, the hash check,
///   the move into the store's files folder).
/// - `download-routes`: the engine's ranged `GET`s alone through the same transport, as it asks
///   for them, each into a file of its own (no placement, no hash check, no store): where the
///   download's time goes.
/// - `raw-put` / `raw-get`: the baseline through the same `URLSession` stack: the whole file in
///   one streamed `PUT` from the file, one `GET` saved to a file (with `--token`, the `GET` of
///   sync-server's own file route, whole: where the download's time goes, server or device).
///
/// - `socket-put` / `socket-get`: the same through a plain socket (``SocketTransfer``).
///
/// Not a benchmark of its own (`--list` does not show it): only `files` starts it.
enum FilesDevice {
    static let command = "files-device"
    static let tenant = "bench"
    static let userID = "tech-0"
    /// The files are JPEG photos as far as the server can tell (they begin as one does), for
    /// IssueLogged's `photo_file` (at most 25 MB): the only file field of the sample contracts a
    /// device writes. Larger files go through the routes alone (`upload-routes`).
    static let contentType = "image/jpeg"
    static let team = "t-1"
    static let photoField = FileField(contract: "IssueLogged", field: "photo_file")

    struct Report: Codable, Sendable {
        /// The transfer's wall time (`syncNow()`, `file(for:)`, or the raw request).
        var seconds: Double
        /// `importFile(at:)` before an upload (0 otherwise).
        var importSeconds: Double
        /// The high-water mark of resident memory (VmHWM) of the whole process, at its end.
        var peakKiB: Int
        /// The high-water mark after the store opened and before the transfer (after the import
        /// for an upload).
        var peakBeforeKiB: Int
        var bytes: Int64
        var sha256: String
    }

    static func main(_ arguments: [String]) -> Int32 {
        guard let mode = arguments.first else {
            Console.error("usage: outpost-bench \(command) upload|download|raw-put|raw-get --option value ...")
            return 2
        }
        var options: [String: String] = [:]
        var index = 1
        while index + 1 < arguments.count, arguments[index].hasPrefix("--") {
            options[String(arguments[index].dropFirst(2))] = arguments[index + 1]
            index += 2
        }
        let given = options
        do {
            let report = try runBlocking { try await run(mode, given) }
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            Console.out(String(decoding: try encoder.encode(report), as: UTF8.self))
            return 0
        } catch {
            Console.error("error: files-device \(mode): \(error)")
            return 1
        }
    }

    private static func option(_ options: [String: String], _ name: String) throws -> String {
        guard let value = options[name] else { throw BenchmarkError("files-device: --\(name) is missing") }
        return value
    }

    static func run(_ mode: String, _ options: [String: String]) async throws -> Report {
        switch mode {
        case "download-routes":
            // The engine's ranged GETs alone, as it asks for them (from fileChunkBytes, doubling up
            // to fileRangeLimitBytes, each into a file of its own): no placement, no hash, no store.
            guard let server = URL(string: try option(options, "server")) else { throw BenchmarkError("bad --server") }
            let token = try option(options, "token")
            guard let size = Int64(try option(options, "size")) else { throw BenchmarkError("bad --size") }
            let sha = try option(options, "sha256")
            let transport = URLSessionTransport(baseURL: server, timeout: 600) { token }
            let configuration = SyncEngineConfiguration(scopes: [])
            var step = Int64(configuration.fileChunkBytes)
            let limit = Int64(configuration.fileRangeLimitBytes)
            let folder = URL(fileURLWithPath: try option(options, "folder"), isDirectory: true)
            let peakBefore = ProcessMemory.status("VmHWM")
            let clock = ContinuousClock()
            let start = clock.now
            var offset: Int64 = 0
            while offset < size {
                let target = folder.appendingPathComponent("range-\(offset)")
                let piece = try await transport.fileBytes(sha256: sha, range: offset...(min(size, offset + step) - 1), into: target)
                guard piece.start == offset, piece.byteCount > 0 else {
                    throw BenchmarkError("the range from \(offset) answered from \(piece.start)")
                }
                try FileManager.default.removeItem(at: target)
                offset += piece.byteCount
                step = min(limit, step * 2)
            }
            let seconds = Timing.seconds(clock.now - start)
            return Report(
                seconds: seconds, importSeconds: 0, peakKiB: ProcessMemory.status("VmHWM"), peakBeforeKiB: peakBefore, bytes: offset, sha256: sha)
        case "upload", "upload-routes", "download":
            guard let server = URL(string: try option(options, "server")) else { throw BenchmarkError("bad --server") }
            let token = try option(options, "token")
            let folder = URL(fileURLWithPath: try option(options, "folder"), isDirectory: true)
            let store = try openStore(folder)
            let transport = URLSessionTransport(baseURL: server, timeout: 600) { token }
            let configuration = SyncEngineConfiguration(scopes: [], retriesAutomatically: false, usesLiveChannel: false)
            let engine = SyncEngine(store: store, transport: transport, configuration: configuration)
            let clock = ContinuousClock()
            var importSeconds = 0.0
            let reference: FileReference
            if mode == "download" {
                guard let size = Int64(try option(options, "size")) else { throw BenchmarkError("bad --size") }
                reference = try FileReference(sha256: try option(options, "sha256"), byteCount: size, contentType: contentType, name: "photo.jpg")
            } else {
                let source = URL(fileURLWithPath: try option(options, "source"))
                let start = clock.now
                if mode == "upload" {
                    // As an app attaches a photo: imported for its field, then a write naming it.
                    reference = try store.importFile(at: source, contentType: contentType, name: "photo.jpg", for: photoField)
                    _ = try store.record(
                        IssueLogged(
                            teamId: team, serviceAssetId: "sa-1", category: .damage, description: "The brake lever is loose", photoFile: reference,
                            observedOn: CalendarDate(year: 2026, month: 11, day: 29)))
                } else {
                    reference = try store.importFile(at: source, contentType: contentType, name: "photo.jpg")
                }
                importSeconds = Timing.seconds(clock.now - start)
            }
            let peakBefore = ProcessMemory.status("VmHWM")
            let start = clock.now
            switch mode {
            case "upload":
                let result = await engine.syncNow()
                guard case .succeeded(let pushed, _) = result, pushed == 1 else { throw BenchmarkError("syncNow() answered \(result)") }
                guard try store.storedFile(sha256: reference.sha256)?.state == .uploaded else {
                    throw BenchmarkError(
                        "after syncNow() the file is not uploaded: \(String(describing: try store.storedFile(sha256: reference.sha256)))")
                }
            case "upload-routes":
                try await uploadThroughRoutes(reference, store: store, transport: transport, chunkBytes: configuration.fileChunkBytes)
            default:
                let url = try await engine.file(for: reference)
                let size = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value
                guard size == reference.byteCount else { throw BenchmarkError("file(for:) gave \(size ?? -1) bytes, not \(reference.byteCount)") }
            }
            let seconds = Timing.seconds(clock.now - start)
            await engine.stop()
            try store.close()
            return Report(
                seconds: seconds, importSeconds: importSeconds, peakKiB: ProcessMemory.status("VmHWM"), peakBeforeKiB: peakBefore,
                bytes: reference.byteCount, sha256: reference.sha256)
        case "raw-put", "raw-get":
            guard let url = URL(string: try option(options, "url")) else { throw BenchmarkError("bad --url") }
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = 600
            configuration.timeoutIntervalForResource = 2_400
            let session = URLSession(configuration: configuration)
            defer { session.finishTasksAndInvalidate() }
            var request = URLRequest(url: url)
            // With a token: the file route of sync-server itself, asked for the whole file.
            if let token = options["token"] { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            let peakBefore = ProcessMemory.status("VmHWM")
            let clock = ContinuousClock()
            let start = clock.now
            let bytes: Int64
            if mode == "raw-put" {
                let source = URL(fileURLWithPath: try option(options, "source"))
                request.httpMethod = "PUT"
                request.setValue(contentType, forHTTPHeaderField: "Content-Type")
                let (_, response) = try await transfer(session) { done in session.uploadTask(with: request, fromFile: source, completionHandler: done)
                }
                guard response.statusCode == 204 else { throw BenchmarkError("raw PUT answered \(response.statusCode)") }
                bytes = (try FileManager.default.attributesOfItem(atPath: source.path)[.size] as? NSNumber)?.int64Value ?? 0
            } else {
                let folder = URL(fileURLWithPath: try option(options, "folder"), isDirectory: true)
                let target = folder.appendingPathComponent("raw-get.bin")
                let (location, response): (URL?, HTTPURLResponse) = try await withCheckedThrowingContinuation { continuation in
                    let task = session.downloadTask(with: request) { location, response, error in
                        // The temporary file goes when the handler returns: moved here, as an app would keep it.
                        if let error { return continuation.resume(throwing: error) }
                        guard let response = response as? HTTPURLResponse else {
                            return continuation.resume(throwing: BenchmarkError("no HTTP response"))
                        }
                        guard let location else { return continuation.resume(returning: (nil, response)) }
                        do {
                            try? FileManager.default.removeItem(at: target)
                            try FileManager.default.moveItem(at: location, to: target)
                            continuation.resume(returning: (target, response))
                        } catch {
                            continuation.resume(throwing: error)
                        }
                    }
                    task.resume()
                }
                guard response.statusCode == 200, let location else { throw BenchmarkError("raw GET answered \(response.statusCode)") }
                bytes = (try FileManager.default.attributesOfItem(atPath: location.path)[.size] as? NSNumber)?.int64Value ?? 0
                guard bytes == Int64(try option(options, "size")) else { throw BenchmarkError("raw GET gave \(bytes) bytes") }
            }
            let seconds = Timing.seconds(clock.now - start)
            return Report(
                seconds: seconds, importSeconds: 0, peakKiB: ProcessMemory.status("VmHWM"), peakBeforeKiB: peakBefore, bytes: bytes, sha256: "")
        case "socket-put", "socket-get":
            guard let url = URL(string: try option(options, "url")), let port = url.port else { throw BenchmarkError("bad --url") }
            let peakBefore = ProcessMemory.status("VmHWM")
            let clock = ContinuousClock()
            let start = clock.now
            let bytes: Int64
            if mode == "socket-put" {
                let source = URL(fileURLWithPath: try option(options, "source"))
                let status = try SocketTransfer.put(port: port, path: url.path, source: source)
                guard status == 204 else { throw BenchmarkError("socket PUT answered \(status)") }
                bytes = (try FileManager.default.attributesOfItem(atPath: source.path)[.size] as? NSNumber)?.int64Value ?? 0
            } else {
                let target = URL(fileURLWithPath: try option(options, "folder"), isDirectory: true).appendingPathComponent("socket-get.bin")
                let (status, written) = try SocketTransfer.get(port: port, path: url.path, into: target)
                guard status == 200, written == Int64(try option(options, "size")) else {
                    throw BenchmarkError("socket GET answered \(status) with \(written) bytes")
                }
                bytes = written
            }
            let seconds = Timing.seconds(clock.now - start)
            return Report(
                seconds: seconds, importSeconds: 0, peakKiB: ProcessMemory.status("VmHWM"), peakBeforeKiB: peakBefore, bytes: bytes, sha256: "")
        default:
            throw BenchmarkError("unknown mode '\(mode)'")
        }
    }

    /// The file routes as the engine's upload drives them (`FileTransfers.upload`, which only a
    /// write naming the file sets going): `POST` the declaration, then `PATCH`es of `chunkBytes`
    /// read from the store's copy, each acknowledged offset recorded in the store.
    static func uploadThroughRoutes(_ reference: FileReference, store: OfflineStore, transport: any SyncTransport, chunkBytes: Int) async throws {
        let answer = try await transport.startFileUpload(FileUploadRequest(reference))
        guard answer.state == .uploading, let id = answer.uploadID else { throw BenchmarkError("the server answered \(answer.state), not an upload") }
        var offset = answer.offset
        while offset < reference.byteCount {
            let count = Int(min(Int64(chunkBytes), reference.byteCount - offset))
            let bytes = try store.readFileBytes(sha256: reference.sha256, offset: offset, count: count)
            switch try await transport.sendFileBytes(bytes, uploadID: id, offset: offset) {
            case .accepted(let acknowledged): offset = acknowledged
            case .offsetMismatch(let serverOffset): throw BenchmarkError("offset mismatch: the server holds \(serverOffset), not \(offset)")
            }
            try store.recordUploadProgress(sha256: reference.sha256, uploadID: id, offset: offset)
        }
    }

    /// A data or upload task's answer, awaited.
    private static func transfer(
        _ session: URLSession, _ make: (@escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void) -> URLSessionTask
    ) async throws -> (Data?, HTTPURLResponse) {
        try await withCheckedThrowingContinuation { continuation in
            let task = make { data, response, error in
                if let error { return continuation.resume(throwing: error) }
                guard let response = response as? HTTPURLResponse else { return continuation.resume(throwing: BenchmarkError("no HTTP response")) }
                continuation.resume(returning: (data, response))
            }
            task.resume()
        }
    }

    static func openStore(_ folder: URL) throws -> OfflineStore {
        try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: folder.appendingPathComponent("store.sqlite"), tenantId: tenant, userId: userID, deviceId: "bench-files",
                keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys", isDirectory: true)),
                // Room for the 1 GiB file: past the cache (500 MB by default) a file just
                // downloaded is evicted at once, and `file(for:)` answers a path that is gone.
                storageLimits: StorageLimits(fileCacheBytes: 4 << 30)
            ), contracts: ContractRegistry.self
        )
    }
}

/// The other raw client of `files`: HTTP/1.1 over a plain socket to 127.0.0.1, the body streamed
/// between the socket and a file 1 MiB at a time, nothing else (no `URLSession`, no
/// libcurl): the ceiling of a transfer through the raw server.
enum SocketTransfer {
    /// `PUT path` with the file's bytes; the status.
    static func put(port: Int, path: String, source: URL) throws -> Int {
        let descriptor = try connected(port: port)
        defer { close(descriptor) }
        let size = (try FileManager.default.attributesOfItem(atPath: source.path)[.size] as? NSNumber)?.int64Value ?? 0
        try send(
            descriptor,
            Array(
                "PUT \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: \(FilesDevice.contentType)\r\nContent-Length: \(size)\r\nConnection: close\r\n\r\n"
                    .utf8))
        let handle = try FileHandle(forReadingFrom: source)
        defer { try? handle.close() }
        while let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty { try send(descriptor, Array(piece)) }
        let (status, _, _) = try readHead(descriptor)
        return status
    }

    /// `GET path` into `target`; the status and the bytes written.
    static func get(port: Int, path: String, into target: URL) throws -> (status: Int, bytes: Int64) {
        let descriptor = try connected(port: port)
        defer { close(descriptor) }
        try send(descriptor, Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8))
        let (status, length, rest) = try readHead(descriptor)
        guard FileManager.default.createFile(atPath: target.path, contents: nil) else { throw BenchmarkError("cannot create \(target.path)") }
        let handle = try FileHandle(forWritingTo: target)
        defer { try? handle.close() }
        var written = Int64(rest.count)
        try handle.write(contentsOf: rest)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while written < length {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            try handle.write(contentsOf: Data(buffer[0..<count]))
            written += Int64(count)
        }
        return (status, written)
    }

    private static func connected(port: Int) throws -> Int32 {
        #if canImport(Darwin)
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #else
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard descriptor >= 0 else { throw BenchmarkError("socket(): \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(descriptor)
            throw BenchmarkError("connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        return descriptor
    }

    private static func send(_ descriptor: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw BenchmarkError("send: \(String(cString: strerror(errno)))") }
            sent += count
        }
    }

    /// The status, the `Content-Length` (0 when absent) and the body bytes read with the head.
    private static func readHead(_ descriptor: Int32) throws -> (Int, Int64, Data) {
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw BenchmarkError("the connection closed before the response's head") }
            received.append(contentsOf: buffer[0..<count])
            guard let end = received.firstRange(of: Data("\r\n\r\n".utf8)) else { continue }
            let head = String(decoding: received[received.startIndex..<end.lowerBound], as: UTF8.self).lowercased()
            let lines = head.components(separatedBy: "\r\n")
            let parts = lines[0].split(separator: " ")
            guard parts.count >= 2, let status = Int(parts[1]) else { throw BenchmarkError("bad status line '\(lines[0])'") }
            let length = lines.first { $0.hasPrefix("content-length:") }.flatMap { Int64($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
            return (status, length, Data(received[end.upperBound...]))
        }
    }
}
