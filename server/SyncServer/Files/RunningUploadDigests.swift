import ContractRuntime
import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// The SHA-256 of uploads under way, hashed as their pieces are stored by this process, so the
/// check of the last piece reads nothing back: without it, a 1 GiB upload is read whole a second
/// time to be hashed.
///
/// A cache, not a record: an upload whose pieces another process stored (PostgreSQL, several
/// servers), or one this process forgot (restarted, or past ``capacity``), is hashed by reading
/// its staged bytes, as before. An entry is used only when it covers exactly the bytes the
/// store holds.
final class RunningUploadDigests: Sendable {
    /// One upload's hash so far: over its first `length` bytes, and those bytes' head.
    struct Entry: Sendable {
        var hasher = SHA256()
        var length: Int64 = 0
        var head: [UInt8] = []
        fileprivate var lastUse: UInt64 = 0

        mutating func add(_ piece: ByteBuffer) {
            piece.withUnsafeReadableBytes { bytes in
                if head.count < FileSignature.headBytes { head += bytes.prefix(FileSignature.headBytes - head.count) }
                hasher.update(bufferPointer: bytes)
            }
            length += Int64(piece.readableBytes)
        }
    }

    /// Uploads followed at once (about 200 bytes each): past it, the least recently used is
    /// forgotten and hashed by reading back when it completes.
    static let capacity = 4_096

    static let shared = RunningUploadDigests()

    private struct State {
        var entries: [String: Entry] = [:]
        var clock: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    /// The hash of `upload` to go on from `start`, the bytes the store holds: a new one from 0,
    /// the one kept when it covers exactly them, else `nil` (the upload is not followed).
    func resume(_ upload: String, at start: Int64) -> Entry? {
        state.withLockedValue { state in
            guard let entry = state.entries.removeValue(forKey: upload) else { return start == 0 ? Entry() : nil }
            return entry.length == start ? entry : nil
        }
    }

    /// Keeps `entry` for the upload's next piece.
    func keep(_ upload: String, _ entry: Entry) {
        state.withLockedValue { state in
            state.clock += 1
            var entry = entry
            entry.lastUse = state.clock
            state.entries[upload] = entry
            if state.entries.count > Self.capacity, let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
                state.entries[oldest] = nil
            }
        }
    }

    /// The upload's digest when it is followed over exactly `length` bytes; forgets it either way.
    func finish(_ upload: String, length: Int64) -> StagedDigest? {
        guard let entry = state.withLockedValue({ $0.entries.removeValue(forKey: upload) }), entry.length == length else { return nil }
        return StagedDigest(sha256: entry.hasher.finalize().map { String(format: "%02x", $0) }.joined(), head: entry.head)
    }

    func forget(_ upload: String) {
        state.withLockedValue { _ = $0.entries.removeValue(forKey: upload) }
    }

    /// The bytes the hash of `upload` covers, when it is followed.
    func length(of upload: String) -> Int64? { state.withLockedValue { $0.entries[upload]?.length } }
}
