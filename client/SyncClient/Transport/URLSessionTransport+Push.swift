package import Foundation
public import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// MARK: Compressed pushes
// A push body is JSON whose keys repeat in every mutation: gzip takes most of it away (see
// `push-compression` in docs/PERFORMANCE.md). Bodies from ``pushCompressionThreshold`` bytes are
// sent with `Content-Encoding: gzip`; a server that refuses the encoding is sent the push again as
// is (nothing of a refused request is applied, and a push is idempotent anyway) and no compressed
// push again by this transport; the engine keeps the refusal in its store, so that the next launch's
// transport sends its pushes as they are from the first.

extension URLSessionTransport {
    /// The default of ``pushCompressionThreshold``: 1 KiB. Below it gzip's header and the
    /// deflate block's overhead leave little to save for the CPU it costs (a single small write).
    public static let defaultPushCompressionThreshold = 1024

    /// The zlib level pushes are compressed at: 6, zlib's default. Push bodies are small (a batch of
    /// writes), so the device spends microseconds on them either way, and level 6 saves a few
    /// per cent more of the bytes a metered connection pays for than the server's level 1.
    package static let pushCompressionLevel: Int32 = 6

    /// Whether the next push above the threshold goes compressed: a threshold is set and the
    /// server has not refused a compressed push.
    public var compressesPushes: Bool {
        pushCompressionThreshold != nil && !pushCompressionRefused
    }

    /// Whether the server refused a compressed push (415, or an older server's 400 naming the
    /// encoding), now or in an earlier launch (``rememberPushCompressionRefused()``).
    public var pushCompressionRefused: Bool { compressionRefusal.withLock { $0 } }

    /// Sends pushes uncompressed from now on: the engine's store remembers that the server
    /// refused a compressed push in an earlier launch.
    public func rememberPushCompressionRefused() { compressionRefusal.withLock { $0 = true } }

    /// `POST /sync/v1/push`, gzipped from ``pushCompressionThreshold`` bytes unless the server refused it, telling `sent` each body's size.
    public func push(_ request: PushRequest, sent: @Sendable (Int) -> Void) async throws(TransportError) -> PushResponse {
        var urlRequest = makeRequest(path: "sync/v1/push", query: [])
        urlRequest.httpMethod = "POST"
        urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        urlRequest.setValue(SchemaHeader.encode(request.schema), forHTTPHeaderField: ProtocolHeaders.schema)
        urlRequest.setValue(request.clientId, forHTTPHeaderField: ProtocolHeaders.clientID)
        let json: Data
        do {
            json = try JSONEncoder().encode(request)
        } catch {
            throw .decoding("encoding the push: \(error)")
        }
        if let compressed = compressedPushBody(json) {
            var gzipped = urlRequest
            gzipped.httpBody = compressed
            gzipped.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
            sent(compressed.count)
            do {
                return try await send(gzipped, as: PushResponse.self)
            } catch  where Self.refusesCompressedBody(error) {
                // Sent again as is below; remembered, so later pushes go as is at once.
                rememberPushCompressionRefused()
            }
        }
        urlRequest.httpBody = json
        sent(json.count)
        return try await send(urlRequest, as: PushResponse.self)
    }

    /// `json` gzip-compressed when it is to be sent so (``compressesPushes``, and at least
    /// ``pushCompressionThreshold`` bytes); `nil` to send it as is.
    package func compressedPushBody(_ json: Data) -> Data? {
        guard let threshold = pushCompressionThreshold, json.count >= threshold, !pushCompressionRefused else { return nil }
        return Gzip.compress(json, level: Self.pushCompressionLevel)
    }

    /// Whether `error` answers a compressed body by refusing its encoding: 415 (this server's
    /// `unsupported_encoding`, or a proxy's Unsupported Media Type), or a 400 whose message names
    /// `Content-Encoding` (a server from before 415 that did not read gzip).
    static func refusesCompressedBody(_ error: TransportError) -> Bool {
        guard case .http(let status, let body, _) = error else { return false }
        if status == 415 { return true }
        guard status == 400, let detail = body?.error else { return false }
        return detail.code == .unsupportedEncoding || detail.message.localizedCaseInsensitiveContains("Content-Encoding")
    }
}
