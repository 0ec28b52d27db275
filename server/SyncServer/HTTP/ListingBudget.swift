import CZlib
import ContractRuntime
import Foundation
import Hummingbird
import NIOCore
import SyncProtocol

/// The one byte budget of every response that lists stored data: pull pages, the change feed,
/// a user's export, the fleet census, the sinks and their dead letters, the console's lists.
///
/// Two bounds, the same for every such route:
///
/// - **A page is bounded in bytes** (``pageBytes``, `--page-bytes`, 4 MiB), whatever its `limit`:
///   it takes items while what it took so far is within the budget (``ResponsePage``), so it ends
///   with the first item that takes it past the budget and an item larger than the budget travels
///   alone. A page that stopped there says `has_more` and gives the cursor to continue from.
/// - **Pages share the process's memory** (``memory``, `--response-memory`, 256 MiB): a route
///   reserves what one page may weigh (``reserve()``) before it reads anything, keeps only its
///   body's bytes once written, and gives those back once the body is sent (``respond(_:request:lease:)``).
///   Without room, a request waits its turn up to 10 s, then is answered 503 `server_busy` with
///   `Retry-After`.
///
/// ```swift
/// let lease = try await listing.reserve()
/// var page = listing.page()
/// for item in items where page.hasRoom { page.take(bytes: item.count) … }
/// return listing.respond(body, request: request, lease: lease)
/// ```
struct ListingBudget: Sendable {
    /// The bytes of items one page holds at most; the item that takes it past them is its last.
    let pageBytes: Int
    /// The memory all listing pages of the process share.
    let memory: ResponseMemoryBudget
    /// What one page reserves of ``memory`` while it is read and written.
    let reservation: Int

    /// - Parameters:
    ///   - pageBytes: the bytes of items a page holds at most.
    ///   - memory: the process's shared budget.
    ///   - largestItemBytes: the largest item a page may end with (the largest row a contract allows).
    init(pageBytes: Int, memory: ResponseMemoryBudget, largestItemBytes: Int) {
        self.pageBytes = max(1, pageBytes)
        self.memory = memory
        reservation = memory.reservation(pageBytes: max(1, pageBytes), largestRowBytes: largestItemBytes)
    }

    /// The room one page may take, waiting for it up to the budget's wait.
    /// - Throws: ``ServiceError`` 503 `server_busy` with `Retry-After` when no room came in time.
    func reserve() async throws(ServiceError) -> ResponseMemoryBudget.Lease {
        try await memory.acquire(reservation)
    }

    /// An empty page of ``pageBytes``.
    func page() -> ResponsePage { ResponsePage(byteBudget: pageBytes) }

    /// The first of `items` a page takes (at most `limit`), and whether any is left after them.
    func prefix<Item>(_ items: [Item], limit: Int = .max, bytes: (Item) -> Int) -> (items: ArraySlice<Item>, hasMore: Bool) {
        var page = page()
        var taken = 0
        while taken < items.count, taken < limit, page.hasRoom {
            page.take(bytes: bytes(items[taken]))
            taken += 1
        }
        return (items[..<taken], taken < items.count)
    }

    /// A JSON response of a listing page: compressed when the client takes gzip; the lease keeps
    /// only the body's bytes, and gives them back once the body is handed to the connection (or
    /// the response is dropped).
    func respond(_ json: Data, request: Request, lease: ResponseMemoryBudget.Lease, status: HTTPResponse.Status = .ok) -> Response {
        let gzip = request.acceptsGzip
        let body = gzip ? Gzip.compress(json) : json
        lease.shrink(to: body.count)
        return .json(compressible: body, gzipped: gzip, status: status) { lease.release() }
    }

    /// A response streamed as it is produced, in chunks of about ``pageBytes``: for a listing
    /// read a page at a time that is too long for one page and has no cursor (a user's export).
    /// `lease` (from ``reserve()``, taken before the response is answered, so a busy server can
    /// still say 503) holds the room of the first chunk; each chunk gives its room back once it
    /// is handed to the connection, and the next one waits its turn for room (never refused: the
    /// response is under way). Compressed as one gzip stream when the client takes gzip.
    ///
    /// - Parameter produce: writes the body through the function it is given, which may wait
    ///   for the connection and for room.
    func stream(
        request: Request, contentType: String, lease: ResponseMemoryBudget.Lease,
        produce: @escaping @Sendable (_ output: (Data) async throws -> Void) async throws -> Void
    ) -> Response {
        let gzip = request.acceptsGzip
        var headers: HTTPFields = [.contentType: contentType, .vary: "Accept-Encoding"]
        if gzip { headers[.contentEncoding] = "gzip" }
        let (pageBytes, memory, reservation) = (pageBytes, memory, reservation)
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                var lease = lease
                var chunk = Data()
                let compressor = gzip ? GzipStream() : nil
                defer { lease.release() }
                try await produce { line in
                    chunk.append(line)
                    guard chunk.count >= pageBytes else { return }
                    let bytes = compressor?.compress(chunk, finish: false) ?? chunk
                    chunk = Data()
                    if !bytes.isEmpty { try await writer.write(ByteBuffer(bytes: bytes)) }
                    lease.release()
                    lease = await memory.acquireWaiting(reservation)
                }
                let bytes = compressor?.compress(chunk, finish: true) ?? chunk
                if !bytes.isEmpty { try await writer.write(ByteBuffer(bytes: bytes)) }
                try await writer.finish(nil)
            })
    }
}

/// One gzip member written a part at a time (``ListingBudget/stream(request:contentType:lease:produce:)``),
/// at the level of the server's responses (``Gzip/responseLevel``).
final class GzipStream {
    private var stream = z_stream()

    init() {
        let status = deflateInit2_(
            &stream, Gzip.responseLevel, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        precondition(status == Z_OK, "zlib refused deflateInit2 with valid parameters")
    }

    deinit { deflateEnd(&stream) }

    /// The compressed bytes `data` adds to the stream; with `finish`, the stream's end too.
    func compress(_ data: Data, finish: Bool) -> Data {
        var output = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        data.withUnsafeBytes { input in
            stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = uInt(input.count)
            while true {
                var status: Int32 = Z_OK
                let produced = buffer.withUnsafeMutableBytes { out -> Int in
                    stream.next_out = out.bindMemory(to: Bytef.self).baseAddress
                    stream.avail_out = uInt(out.count)
                    status = deflate(&stream, finish ? Z_FINISH : Z_NO_FLUSH)
                    return out.count - Int(stream.avail_out)
                }
                precondition(status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR, "deflate failed (status \(status))")
                output.append(contentsOf: buffer[..<produced])
                if finish ? status == Z_STREAM_END : stream.avail_out != 0 { break }
            }
        }
        return output
    }
}

/// A page being filled: it takes items, in order, while the bytes it holds are within its
/// budget. So a page weighs at most its budget plus one item, and an item larger than the budget
/// comes alone (the first item is always taken).
struct ResponsePage: Sendable {
    /// The bytes of items the page holds at most but for its last item.
    let byteBudget: Int
    /// The bytes of the items taken.
    private(set) var bytes = 0
    /// The items taken.
    private(set) var count = 0

    init(byteBudget: Int) {
        self.byteBudget = byteBudget
    }

    /// Whether the page takes another item.
    var hasRoom: Bool { bytes <= byteBudget }

    /// Whether the page ended on its budget (then more may follow it).
    var isFull: Bool { !hasRoom }

    /// The bytes left before the budget (0 once full).
    var remaining: Int { max(0, byteBudget - bytes) }

    /// Counts an item of `bytes` taken.
    mutating func take(bytes: Int) {
        self.bytes += max(0, bytes)
        count += 1
    }
}

/// The opaque cursor of a listing that continues after its last item (a key of several values):
/// `l1.` and the base64url of the key's canonical JSON array.
enum ListingCursor {
    /// The cursor of `key`.
    static func encode(_ key: [JSONValue]) -> String {
        let data = Data(CanonicalJSON.bytes(.array(key)))
        return "l1."
            + data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The key of a cursor ``encode(_:)`` wrote, of `count` values.
    /// - Throws: ``ServiceError`` 400 when it is not one.
    static func decode(_ text: String, count: Int, name: String = "after") throws(ServiceError) -> [JSONValue] {
        let refused = ServiceError.malformed("`\(name)` must be the `cursor` a page of this list returned")
        guard text.hasPrefix("l1."), text.utf8.count <= 4096 else { throw refused }
        var base64 = String(text.dropFirst(3)).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), case .array(let key)? = JSONParser.parse(String(decoding: data, as: UTF8.self)),
            key.count == count
        else { throw refused }
        return key
    }
}
