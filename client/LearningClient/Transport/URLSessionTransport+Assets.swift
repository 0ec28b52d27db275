public import Foundation
public import SyncClient
import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The asset routes over URLSession.
///
/// Files come as byte ranges, each written to a temporary file as it arrives (``FileDownload``),
/// never into memory (whatever its size, even when a changed file comes back whole), and removed
/// when the range fails or is cancelled. Transfers cannot be resumed on Linux (no resume data), so
/// ``AssetDownloader`` asks for ranges of a bounded size and records each one it appends:
/// an interruption loses at most one range.
extension URLSessionTransport: AssetTransport {
    public func assetURL(id: String) -> URL {
        // Percent-encoded as the server encodes its download URLs: a `/` in an id stays in the segment.
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let segment = id.addingPercentEncoding(withAllowedCharacters: allowed) ?? id
        let base = baseURL.appendingPathComponent("assets").absoluteString
        return URL(string: base + "/" + segment) ?? baseURL.appendingPathComponent("assets").appendingPathComponent(id)
    }

    public func downloadAssetRange(_ range: AssetRangeRequest) async throws(TransportError) -> AssetRangeResponse {
        do {
            return try await downloadAssetRange(range, refresh: false)
        } catch .http(status: 401, _, _) where Self.sameOrigin(range.url, baseURL) {
            return try await downloadAssetRange(range, refresh: true)
        }
    }

    private func downloadAssetRange(_ range: AssetRangeRequest, refresh: Bool) async throws(TransportError) -> AssetRangeResponse {
        var request = URLRequest(url: range.url, timeoutInterval: timeout)
        request.httpMethod = "GET"
        // The device token goes only to this server, not to a CDN a download URL may name.
        if Self.sameOrigin(range.url, baseURL) { try await authorize(&request, refresh: refresh) }
        // Ranges count the stored bytes: never ask for a compressed form.
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        if let header = range.rangeHeader {
            request.setValue(header, forHTTPHeaderField: "Range")
            if let etag = range.ifRange { request.setValue(etag, forHTTPHeaderField: "If-Range") }
        }
        let body: URL
        let response: URLResponse
        if let exchange {
            // Through the exchange's checked connections; a range is bounded in size, so its
            // bytes pass through memory on their way to the file.
            let data: Data
            (data, response) = try await exchange.send(request)
            body = (range.bodyDirectory ?? FileManager.default.temporaryDirectory).appendingPathComponent(
                FileDownload.filePrefix + UUID().uuidString)
            do {
                try data.write(to: body)
            } catch {
                throw .network("the range could not be written to \(body.path): \(error)")
            }
        } else {
            do {
                (body, response) = try await FileDownload.body(of: request, configuration: session.configuration, in: range.bodyDirectory)
            } catch {
                throw .network(String(describing: error))
            }
        }
        var keepsBody = false
        defer { if !keepsBody { try? FileManager.default.removeItem(at: body) } }
        guard let http = response as? HTTPURLResponse else { throw .network("not an HTTP response") }
        let length = ((try? FileManager.default.attributesOfItem(atPath: body.path)[.size]) as? NSNumber)?.int64Value ?? 0
        let etag = http.value(forHTTPHeaderField: "ETag")
        switch http.statusCode {
        case 200:
            keepsBody = true
            return AssetRangeResponse(bodyFile: body, offset: 0, length: length, totalSize: length, etag: etag, isWholeFile: true)
        case 206:
            guard let contentRange = http.value(forHTTPHeaderField: "Content-Range").flatMap(Self.parseContentRange) else {
                throw .decoding("a 206 answer without a usable Content-Range")
            }
            keepsBody = true
            return AssetRangeResponse(
                bodyFile: body, offset: contentRange.first, length: length, totalSize: contentRange.total, etag: etag, isWholeFile: false
            )
        default:
            let data = (try? Data(contentsOf: body)) ?? Data()
            throw Self.error(status: http.statusCode, data: data, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        }
    }

    /// `bytes first-last/total` (total may be `*`).
    static func parseContentRange(_ text: String) -> (first: Int64, total: Int64?)? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst("bytes ".count)
        let parts = spec.split(separator: "/", maxSplits: 1)
        guard parts.count == 2, let dash = parts[0].firstIndex(of: "-"), let first = Int64(parts[0][..<dash]) else { return nil }
        return (first, Int64(parts[1]))
    }

    static func sameOrigin(_ url: URL, _ base: URL) -> Bool {
        url.scheme == base.scheme && url.host == base.host && url.port == base.port
    }
}
