/// The first bytes that files of common types begin with, by which a file is checked against the
/// content type it is declared with: the server refuses an upload declared `image/jpeg` that is
/// an HTML page (422 `content_type_mismatch`) rather than store and serve it as one. A type not
/// listed here is taken as declared (its files have no signature to check).
package enum FileSignature {
    /// The most bytes a signature reads.
    package static let headBytes = 16

    /// Whether `head` (a file's first bytes) may be a file of `contentType`.
    package static func matches(_ head: [UInt8], contentType: String) -> Bool {
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + bytes.count && Array(head[offset..<offset + bytes.count]) == bytes
        }
        func ascii(_ text: String) -> [UInt8] { Array(text.utf8) }
        switch contentType {
        case "image/jpeg": return starts([0xFF, 0xD8, 0xFF])
        case "image/png": return starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        case "image/gif": return starts(ascii("GIF87a")) || starts(ascii("GIF89a"))
        case "image/webp": return starts(ascii("RIFF")) && starts(ascii("WEBP"), at: 8)
        case "image/heic", "image/heif": return starts(ascii("ftyp"), at: 4)
        case "application/pdf": return starts(ascii("%PDF-"))
        case "audio/mpeg": return starts(ascii("ID3")) || (head.count >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0)
        case "audio/wav", "audio/x-wav": return starts(ascii("RIFF")) && starts(ascii("WAVE"), at: 8)
        case "audio/mp4", "video/mp4", "audio/m4a", "audio/x-m4a": return starts(ascii("ftyp"), at: 4)
        case "application/zip": return starts([0x50, 0x4B, 0x03, 0x04]) || starts([0x50, 0x4B, 0x05, 0x06])
        default: return true
        }
    }
}
