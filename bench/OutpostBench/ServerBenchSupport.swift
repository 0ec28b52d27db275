import CZlib
import Contracts
import Foundation

// Helpers shared by the server benchmarks (`push-ingestion`, `pull-compression`).

/// A private temporary folder for one server benchmark: a database, asset files. Removed by
/// ``remove()`` unless `OUTPOST_BENCH_KEEP` is set.
struct TemporaryFolder: Sendable {
    let url: URL

    /// `TMPDIR/outpost-bench-<name>-<pid>`, empty.
    init(_ name: String) throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("outpost-bench-\(name)-\(ProcessInfo.processInfo.processIdentifier)", isDirectory: true)
        try? FileManager.default.removeItem(at: url)
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            throw BenchmarkError("cannot create the temporary folder \(url.path): \(error)")
        }
    }

    /// A new, empty sub-folder (`run-3`).
    func folder(_ name: String) throws -> URL {
        let folder = url.appendingPathComponent(name, isDirectory: true)
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    func remove(_ folder: URL) {
        if Self.keep { return }
        try? FileManager.default.removeItem(at: folder)
    }

    func remove() {
        if Self.keep {
            Console.error("note: OUTPOST_BENCH_KEEP is set; kept \(url.path)")
            return
        }
        try? FileManager.default.removeItem(at: url)
    }

    private static var keep: Bool {
        guard let value = ProcessInfo.processInfo.environment["OUTPOST_BENCH_KEEP"] else { return false }
        return !value.isEmpty && value != "0"
    }
}

/// Runs async work from a benchmark's synchronous `run` and waits for it. The work runs on
/// the global concurrent executor; the calling thread (the main thread) only waits.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = BlockingResult<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do {
            box.result = .success(try await body())
        } catch {
            box.result = .failure(error)
        }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// The result of ``runBlocking(_:)``'s task: written once by the task before it signals, read
/// by the waiting thread after the signal.
private final class BlockingResult<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// ULIDs (26 characters of Crockford base32: 48 bits of milliseconds, 80 random bits) from a
/// seeded generator, as devices make them for row ids and client mutation ids.
struct ULIDMaker {
    private static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
    var random: SeededGenerator

    init(seed: UInt64) {
        random = SeededGenerator(seed: seed)
    }

    mutating func make(milliseconds: Int64) -> String {
        var characters: [Character] = []
        characters.reserveCapacity(26)
        var time = UInt64(max(0, milliseconds))
        var timePart: [Character] = []
        for _ in 0..<10 {
            timePart.append(Self.alphabet[Int(time & 31)])
            time >>= 5
        }
        characters += timePart.reversed()
        var bits = random.next()
        var remaining = 64
        for _ in 0..<16 {
            if remaining < 5 {
                bits = random.next()
                remaining = 64
            }
            characters.append(Self.alphabet[Int(bits & 31)])
            bits >>= 5
            remaining -= 5
        }
        return String(characters)
    }

    /// A random lowercase hex string of `count` characters (checksums).
    mutating func hex(_ count: Int) -> String {
        let digits = Array("0123456789abcdef")
        var text = ""
        text.reserveCapacity(count)
        var bits = random.next()
        var remaining = 16
        for _ in 0..<count {
            if remaining == 0 {
                bits = random.next()
                remaining = 16
            }
            text.append(digits[Int(bits & 15)])
            bits >>= 4
            remaining -= 1
        }
        return text
    }
}

/// gzip and deflate through the system zlib, for the compression baselines. `gzip(_:level:)`
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

extension Format {
    /// `23456.7` → `23 457/s`.
    static func rate(_ perSecond: Double) -> String { grouped(Int(perSecond.rounded())) + "/s" }

    /// `40000` → `40 000`.
    static func grouped(_ number: Int) -> String {
        let digits = Array(String(abs(number)))
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { text.append(" ") }
            text.append(digit)
        }
        return (number < 0 ? "-" : "") + text
    }

    /// `0.7312` → `73.1 %`.
    static func percent(_ share: Double) -> String { fixed(share * 100, 1) + " %" }
}
