import Foundation
import Hummingbird
import SyncProtocol

/// `GET` and `HEAD /assets/{id}`: the file streamed from disk with its SHA-256 as a strong
/// `ETag`, `If-None-Match` (304), and single byte ranges for resumable downloads (206, or 416
/// with `Content-Range: bytes */size` when the range starts past the end).
package enum AssetResponse {
    /// A byte range request, already resolved against the file size.
    package enum RangeRequest: Equatable {
        /// No (usable) `Range`: the whole file.
        case whole
        case partial(ClosedRange<Int64>)
        case unsatisfiable
    }

    static func make(_ file: AssetFile, request: Request, context: SyncRequestContext, fileIO: FileIO) async throws -> Response {
        let eTag = "\"\(file.checksum)\""
        var headers: HTTPFields = [
            .eTag: eTag,
            .acceptRanges: "bytes",
            .contentType: file.contentType,
            .cacheControl: "private, max-age=0, must-revalidate",
        ]
        if matches(request.headers[values: .ifNoneMatch], eTag: eTag) {
            return Response(status: .notModified, headers: headers)
        }
        var range = parseRange(request.headers[.range], size: file.size)
        // If-Range: a range only applies to the version the client already has part of.
        if let ifRange = request.headers[.ifRange], ifRange != eTag { range = .whole }

        switch range {
        case .unsatisfiable:
            throw ResponseError(
                error: ServiceError(
                    status: 416, .rangeNotSatisfiable,
                    "the range \(request.headers[.range] ?? "") is outside the asset's \(file.size) bytes"
                ),
                headers: [.contentRange: "bytes */\(file.size)", .eTag: eTag, .acceptRanges: "bytes"]
            )
        case .whole:
            headers[.contentLength] = String(file.size)
            if request.method == .head || file.size == 0 { return Response(status: .ok, headers: headers) }
            let body = try await stream(file, range: 0...(file.size - 1), context: context, fileIO: fileIO)
            return Response(status: .ok, headers: headers, body: body)
        case .partial(let bytes):
            headers[.contentRange] = "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(file.size)"
            headers[.contentLength] = String(bytes.count)
            if request.method == .head { return Response(status: .partialContent, headers: headers) }
            let body = try await stream(file, range: bytes, context: context, fileIO: fileIO)
            return Response(status: .partialContent, headers: headers, body: body)
        }
    }

    /// The bytes of `range`, read from disk in chunks as the client takes them.
    private static func stream(
        _ file: AssetFile, range: ClosedRange<Int64>, context: SyncRequestContext, fileIO: FileIO
    ) async throws -> ResponseBody {
        do {
            return try await fileIO.loadFile(path: file.fileURL.path, range: Int(range.lowerBound)...Int(range.upperBound), context: context)
        } catch {
            context.logger.error("asset \(file.id): its file \(file.fileURL.path) cannot be read")
            throw ServiceError.notFound("the file of asset '\(file.id)' is missing on the server")
        }
    }

    /// Whether an `If-None-Match` list names the entity (`*`, or the tag, weak or strong).
    static func matches(_ values: [String], eTag: String) -> Bool {
        for value in values {
            for candidate in value.split(separator: ",") {
                var tag = candidate.trimmingCharacters(in: .whitespaces)
                if tag == "*" { return true }
                if tag.hasPrefix("W/") { tag.removeFirst(2) }
                if tag == eTag { return true }
            }
        }
        return false
    }

    /// `bytes=a-b`, `bytes=a-` or `bytes=-n`. Anything else (other units, several ranges,
    /// bad syntax) is ignored, as RFC 9110 allows, and the whole file is sent.
    package static func parseRange(_ header: String?, size: Int64) -> RangeRequest {
        guard let header = header?.trimmingCharacters(in: .whitespaces), header.lowercased().hasPrefix("bytes=") else {
            return .whole
        }
        let spec = header.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        // A position past Int64 (`bytes=0-99999999999999999999`) is still a position: past any
        // file's end, so it is clamped like any other, not taken for bad syntax.
        func number(_ text: String) -> Int64? {
            guard !text.isEmpty, text.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
            return Int64(text) ?? .max
        }
        if first.isEmpty {
            // The last n bytes.
            guard let suffix = number(last) else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .partial(max(0, size - suffix)...(size - 1))
        }
        guard let start = number(first) else { return .whole }
        let end: Int64
        if last.isEmpty {
            end = size - 1
        } else {
            guard let value = number(last), value >= start else { return .whole }
            end = min(value, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .partial(start...end)
    }
}
