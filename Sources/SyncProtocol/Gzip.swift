import CZlib
package import Foundation

/// gzip (RFC 1952) through the system zlib, the one implementation of both sides: the server's
/// responses to devices that send `Accept-Encoding: gzip` and its reading of request bodies sent
/// with `Content-Encoding: gzip`, and the device's compressed pushes (`URLSessionTransport`).
package enum Gzip {
    /// Window bits 15 plus 16: zlib writes and reads the gzip wrapper (header and CRC-32).
    private static let gzipWindowBits: Int32 = 15 + 16

    /// The level responses are compressed at: 1, zlib's fastest, not its default 6. On pull
    /// pages of 1 000 rows it keeps most of level 6's reduction (83.9 % instead of 85.7 % smaller
    /// on a learner's page, 73.1 % instead of 76.0 % on a content page: about 10 % more bytes)
    /// in half the time, and compression was a fifth of the server's work per page, on the
    /// path every initial sync waits on (`pull-compression` and `initial-sync` in
    /// docs/PERFORMANCE.md).
    package static let responseLevel: Int32 = 1

    /// The gzip member holding `data`.
    package static func compress(_ data: Data, level: Int32 = responseLevel) -> Data {
        data.withUnsafeBytes { compress($0, level: level) }
    }

    /// The gzip member holding `bytes` (a page's JSON as it was written, without a copy into `Data` first).
    package static func compress(_ bytes: [UInt8], level: Int32 = responseLevel) -> Data {
        bytes.withUnsafeBytes { compress($0, level: level) }
    }

    private static func compress(_ input: UnsafeRawBufferPointer, level: Int32) -> Data {
        var stream = z_stream()
        guard
            deflateInit2_(
                &stream, level, Z_DEFLATED, gzipWindowBits, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)
            ) == Z_OK
        else {
            preconditionFailure("zlib refused deflateInit2 with valid parameters")
        }
        defer { deflateEnd(&stream) }
        // deflateBound is enough for a single Z_FINISH call; add room for the gzip wrapper.
        var output = Data(count: Int(deflateBound(&stream, uLong(input.count))) + 32)
        let produced: Int = output.withUnsafeMutableBytes { out in
            stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = uInt(input.count)
            stream.next_out = out.bindMemory(to: Bytef.self).baseAddress
            stream.avail_out = uInt(out.count)
            let status = deflate(&stream, Z_FINISH)
            precondition(status == Z_STREAM_END, "deflate into a deflateBound buffer must finish (status \(status))")
            return out.count - Int(stream.avail_out)
        }
        output.count = produced
        return output
    }

    package enum InflateFailure: Error {
        case invalid
        case tooLarge
    }

    /// The data of a gzip body, refusing more than `limit` bytes once inflated (a small body
    /// must not expand into gigabytes).
    package static func decompress(_ data: Data, limit: Int) throws(InflateFailure) -> Data {
        var stream = z_stream()
        guard inflateInit2_(&stream, gzipWindowBits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw .invalid
        }
        defer { inflateEnd(&stream) }
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let result: Result<Void, InflateFailure> = data.withUnsafeBytes { input in
            stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = uInt(input.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBytes { out in
                    stream.next_out = out.bindMemory(to: Bytef.self).baseAddress
                    stream.avail_out = uInt(out.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, out.count - Int(stream.avail_out))
                }
                output.append(contentsOf: chunk[0..<produced])
                if output.count > limit { return .failure(.tooLarge) }
                switch status {
                case Z_STREAM_END:
                    return stream.avail_in == 0 ? .success(()) : .failure(.invalid)
                case Z_OK:
                    continue
                case Z_BUF_ERROR where produced > 0:
                    continue
                default:
                    return .failure(.invalid)
                }
            }
        }
        try result.get()
        return output
    }
}
