import ContractRuntime
import Foundation
import Hummingbird
import SyncProtocol

extension Request {
    /// The whole body, refusing one over `limit` bytes with 413 before reading it when the
    /// client announces its length, and as soon as it passes the limit otherwise. A body sent
    /// with `Content-Encoding: gzip` (or `x-gzip`) is inflated, and the limit holds for the
    /// inflated bytes; any other encoding but `identity` is refused with 415
    /// `unsupported_encoding` before the body is read (``unsupportedEncoding(_:)``).
    func collectBody(limit: Int) async throws -> Data {
        if let encoding = headers[.contentEncoding]?.trimmingCharacters(in: .whitespaces).lowercased(),
            !Self.readableEncodings.contains(encoding)
        {
            throw Self.unsupportedEncoding(encoding)
        }
        if let length = headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw Self.tooLarge(limit)
        }
        let buffer: ByteBuffer
        do {
            buffer = try await body.collect(upTo: limit)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            // NIO's "too many bytes", which Hummingbird maps to 413.
            throw Self.tooLarge(limit)
        }
        let data = Data(buffer.readableBytesView)
        switch headers[.contentEncoding]?.trimmingCharacters(in: .whitespaces).lowercased() {
        case nil, "", "identity":
            return data
        case "gzip", "x-gzip":
            do {
                return try Gzip.decompress(data, limit: limit)
            } catch .tooLarge {
                throw Self.tooLarge(limit)
            } catch {
                throw ServiceError.malformed("the body is not valid gzip")
            }
        case let other?:
            throw Self.unsupportedEncoding(other)
        }
    }

    /// The body as a JSON value, read in one pass (``BoundedJSON``): 400 `malformed_request`
    /// when it is not JSON, `nesting_too_deep` past `maximumDepth` levels, `nul_character`
    /// when a string holds U+0000.
    func jsonBody(limit: Int, maximumDepth: Int) async throws -> JSONValue {
        let data = try await collectBody(limit: limit)
        do {
            return try BoundedJSON.parse(data, maximumDepth: maximumDepth)
        } catch .malformed {
            throw ServiceError.malformed("the body is not valid JSON")
        } catch .tooDeep(let depth) {
            throw ServiceError(status: 400, .nestingTooDeep, "the body nests JSON deeper than \(depth) levels")
        } catch .nulCharacter {
            throw ServiceError(status: 400, .nulCharacter, "a string in the body holds U+0000, which no id or text may contain")
        }
    }

    /// The body as a push (``jsonBody(limit:maximumDepth:)``, then its shape).
    func pushBody(limit: Int, maximumDepth: Int) async throws -> PushRequest {
        let json = try await jsonBody(limit: limit, maximumDepth: maximumDepth)
        do {
            return try PushRequest(json: json)
        } catch {
            throw ServiceError.malformed(error.message)
        }
    }

    /// Whether the client takes gzip (`Accept-Encoding` names `gzip` or `*` with a non-zero q).
    var acceptsGzip: Bool {
        for field in headers[values: .acceptEncoding] {
            for item in field.split(separator: ",") {
                let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                guard let coding = parts.first, coding == "gzip" || coding == "x-gzip" || coding == "*" else { continue }
                let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
                if quality > 0 { return true }
            }
        }
        return false
    }

    /// A query parameter, percent-decoded; `nil` when absent.
    func query(_ name: String) -> String? {
        uri.queryParameters[Substring(name)].map(String.init)
    }

    /// The `Content-Encoding`s a body may be sent in (compared in lower case): none, `identity`,
    /// `gzip` and its old name `x-gzip`.
    static let readableEncodings: Set<String> = ["", "identity", "gzip", "x-gzip"]

    /// 415 `unsupported_encoding` for a body in an encoding the server does not read (`br`,
    /// `deflate`, a list of several); `details.accepted` lists those it does. A device that
    /// compressed its push sends it again as is.
    static func unsupportedEncoding(_ encoding: String) -> ServiceError {
        ServiceError(
            status: 415, .unsupportedEncoding,
            "Content-Encoding `\(encoding)` is not supported; send the body as is or gzip",
            details: .object(["accepted": .array([.string("gzip"), .string("identity")])])
        )
    }

    static func tooLarge(_ limit: Int) -> ServiceError {
        ServiceError(status: 413, .payloadTooLarge, "the request body is over this route's limit of \(limit) bytes")
    }
}

extension Response {
    /// A JSON response, keys sorted; gzip-compressed when `compressible` and the client takes
    /// gzip (then `Content-Encoding: gzip`; `Vary: Accept-Encoding` either way).
    static func json(
        _ value: some Encodable, status: HTTPResponse.Status = .ok, request: Request, compressible: Bool = false
    ) throws -> Response {
        json(encoded: try JSONCoding.encoder.encode(value), status: status, request: request, compressible: compressible)
    }

    /// A JSON response from its encoded body, compressed as in ``json(_:status:request:compressible:)``.
    static func json(encoded body: Data, status: HTTPResponse.Status = .ok, request: Request, compressible: Bool = false) -> Response {
        guard compressible else {
            return Response(
                status: status, headers: [.contentType: "application/json; charset=utf-8"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body))
            )
        }
        let gzip = request.acceptsGzip
        return json(compressible: gzip ? Gzip.compress(body) : body, gzipped: gzip, status: status)
    }

    /// A compressible JSON response whose body is ready: gzip-compressed already when `gzipped`
    /// (a pull page written ahead of its request).
    ///
    /// `whenSent` runs once the body is handed to the connection (what it holds may then go).
    static func json(
        compressible body: Data, gzipped: Bool, status: HTTPResponse.Status = .ok, whenSent: (@Sendable () -> Void)? = nil
    ) -> Response {
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8", .vary: "Accept-Encoding"]
        if gzipped { headers[.contentEncoding] = "gzip" }
        let buffer = ByteBuffer(bytes: body)
        guard let whenSent else { return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: buffer)) }
        return Response(
            status: status, headers: headers,
            body: ResponseBody(contentLength: buffer.readableBytes) { writer in
                try await writer.write(buffer)
                whenSent()
                try await writer.finish(nil)
            }
        )
    }
}

/// A request body read as it arrives, never more than `limit` bytes: refused with 413 before
/// reading when the client announces a longer one (``Request/boundedBody(limit:)``), and as soon
/// as it passes the limit otherwise. For routes that stream a body to storage (a file's bytes)
/// rather than collect it.
struct BoundedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    let body: RequestBody
    let limit: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: RequestBody.AsyncIterator
        let limit: Int
        var seen = 0

        mutating func next() async throws -> ByteBuffer? {
            guard let part = try await base.next() else { return nil }
            seen += part.readableBytes
            if seen > limit { throw Request.tooLarge(limit) }
            return part
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: body.makeAsyncIterator(), limit: limit) }
}

extension Request {
    /// The body as it arrives, at most `limit` bytes (``BoundedBody``); 413 at once when
    /// `Content-Length` says more.
    func boundedBody(limit: Int) throws -> BoundedBody {
        if let length = headers[.contentLength].flatMap({ Int($0) }), length > limit { throw Self.tooLarge(limit) }
        return BoundedBody(body: body, limit: limit)
    }
}
