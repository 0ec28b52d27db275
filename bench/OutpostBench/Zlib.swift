import CZlib
import Foundation

/// gzip through the system zlib, for the compression baselines. `gzip(_:level:)`
/// makes the same call as the server's `Gzip.compress` (server/SyncServer/HTTP/Gzip.swift:
/// `deflateInit2` with window bits 15 + 16, memory level 8, the default strategy, one
/// `Z_FINISH`), which is internal to the server; the benchmark checks that both give the same
/// bytes at the server's level.
enum Zlib {
    /// The server's level (`Z_DEFAULT_COMPRESSION`, which zlib maps to 6).
    static let defaultLevel = Z_DEFAULT_COMPRESSION

    static var version: String { String(cString: zlibVersion()) }

    static func gzip(_ data: Data, level: Int32) -> Data {
        var stream = z_stream()
        guard deflateInit2_(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { preconditionFailure("zlib refused deflateInit2 at level \(level)") }
        defer { deflateEnd(&stream) }
        var output = Data(count: Int(deflateBound(&stream, uLong(data.count))) + 32)
        let produced: Int = data.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { out in
                stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = out.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = uInt(out.count)
                let status = deflate(&stream, Z_FINISH)
                precondition(status == Z_STREAM_END, "deflate into a deflateBound buffer must finish (status \(status))")
                return out.count - Int(stream.avail_out)
            }
        }
        output.count = produced
        return output
    }

    /// The data of a gzip member, or `nil` when it is not valid gzip.
    static func gunzip(_ data: Data) -> Data? {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let finished: Bool = data.withUnsafeBytes { input in
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
                switch status {
                case Z_STREAM_END: return stream.avail_in == 0
                case Z_OK: continue
                case Z_BUF_ERROR where produced > 0: continue
                default: return false
                }
            }
        }
        return finished ? output : nil
    }
}
