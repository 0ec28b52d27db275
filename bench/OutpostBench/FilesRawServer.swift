import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix

/// The baseline server of `files`, run as a child process of `outpost-bench` (as `sync-server`
/// is) so that its memory is its own: the same HTTP stack as `sync-server` (Hummingbird 2 on
/// SwiftNIO, HTTP/1.1) with nothing of Outpost in it.
///
///     outpost-bench files-raw-server --folder DIR
///
/// - `PUT /blob/{name}`: the body, streamed as it arrives, appended to `DIR/name` on NIO's thread
///   pool in pieces of up to 1 MiB (as the file routes hand pieces to the blob store), then the
///   file fsynced (as the data folder's blob store does when it promotes a file); `204`.
/// - `GET /blob/{name}`: the file, read a piece of 1 MiB at a time on the thread pool as the
///   client takes it; `200` with its `Content-Length`.
///
/// No authentication, no declaration, no hash, no offsets: the bytes to disk and back.
/// Prints `listening on http://127.0.0.1:PORT` once it listens; stops on SIGTERM.
enum FilesRawServer {
    static let command = "files-raw-server"
    static let piece = 1 << 20

    static func main(_ arguments: [String]) -> Int32 {
        guard arguments.count == 2, arguments[0] == "--folder" else {
            Console.error("usage: outpost-bench \(command) --folder DIR")
            return 2
        }
        let folder = URL(fileURLWithPath: arguments[1], isDirectory: true)
        do {
            try runBlocking { try await serve(folder) }
            return 0
        } catch {
            Console.error("error: \(command): \(error)")
            return 1
        }
    }

    static func serve(_ folder: URL) async throws {
        let threads = NIOThreadPool.singleton
        let router = Router()
        router.put("/blob/:name") { request, context -> Response in
            let url = folder.appendingPathComponent(try context.parameters.require("name"))
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else { throw HTTPError(.internalServerError) }
            let handle = try FileHandle(forWritingTo: url)
            var pending = ByteBuffer()
            for try await var part in request.body {
                pending.writeBuffer(&part)
                if pending.readableBytes >= piece {
                    let data = Data(pending.readableBytesView)
                    pending.clear()
                    try await threads.runIfActive { try handle.write(contentsOf: data) }
                }
            }
            let rest = Data(pending.readableBytesView)
            try await threads.runIfActive {
                try handle.write(contentsOf: rest)
                try handle.synchronize()
                try handle.close()
            }
            return Response(status: .noContent)
        }
        router.get("/blob/:name") { _, context -> Response in
            let url = folder.appendingPathComponent(try context.parameters.require("name"))
            guard let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value else {
                throw HTTPError(.notFound)
            }
            return Response(
                status: .ok, headers: [.contentType: "application/octet-stream", .contentLength: String(size)],
                body: ResponseBody(asyncSequence: Pieces(url: url, size: size, threads: threads)))
        }
        var quiet = Logger(label: "bench.files-raw")
        quiet.logLevel = .critical
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in Console.out("listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)") }, logger: quiet)
        try await app.runService()
    }

    /// A file read a piece at a time, as the client takes it.
    struct Pieces: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let url: URL
        let size: Int64
        let threads: NIOThreadPool

        struct AsyncIterator: AsyncIteratorProtocol {
            let url: URL
            let size: Int64
            let threads: NIOThreadPool
            var offset: Int64 = 0

            mutating func next() async throws -> ByteBuffer? {
                guard offset < size else { return nil }
                let (url, at) = (url, offset)
                let data: Data = try await threads.runIfActive {
                    let handle = try FileHandle(forReadingFrom: url)
                    defer { try? handle.close() }
                    try handle.seek(toOffset: UInt64(at))
                    return try handle.read(upToCount: FilesRawServer.piece) ?? Data()
                }
                guard !data.isEmpty else { return nil }
                offset += Int64(data.count)
                return ByteBuffer(bytes: data)
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(url: url, size: size, threads: threads) }
    }
}
