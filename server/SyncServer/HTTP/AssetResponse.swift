import Foundation
import Hummingbird
import SyncProtocol

/// The conditional and range headers of a file download (``FileDownload``: the files route and
/// an app's ``AppRequest/storedFile(sha256:contentType:cacheControl:)``): `If-None-Match` (304)
/// and single byte ranges for resumable downloads (206, or 416 with `Content-Range: bytes */size`
/// when the range starts past the end).
package enum AssetResponse {
    /// A byte range request, already resolved against the file size.
    package enum RangeRequest: Equatable {
        /// No (usable) `Range`: the whole file.
        case whole
        case partial(ClosedRange<Int64>)
        case unsatisfiable
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
