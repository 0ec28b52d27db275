import ContractRuntime
import Foundation
import SyncServer

/// A one-shot gate: tasks that `wait()` are held until someone calls `open()`.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    private var opened = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    var isOpen: Bool {
        lock.lock()
        defer { lock.unlock() }
        return opened
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            lock.lock()
            if opened {
                lock.unlock()
                continuation.resume()
            } else {
                waiters.append(continuation)
                lock.unlock()
            }
        }
    }

    func open() {
        lock.lock()
        opened = true
        let waiting = waiters
        waiters = []
        lock.unlock()
        for waiter in waiting { waiter.resume() }
    }
}

/// A storage whose write transactions, once their work is done, wait at a gate before they
/// commit: a test holds a transaction open while others run.
struct GatedStorage: SyncStorage {
    var backend: StorageBackend { StorageBackend(self) }
    let base: any SyncStorage
    /// Opened when the transaction's work is done (before it waits).
    let reached: Gate
    let release: Gate
    var auditKey: AuditKey { base.auditKey }
    var contracts: ContractCatalog { base.contracts }
    var defaultBlobStore: any BlobStore { base.defaultBlobStore }

    func write<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) async throws -> T) async throws -> T {
        let reached = reached, release = release
        return try await base.write { transaction in
            let result = try await body(transaction)
            reached.open()
            await release.wait()
            return result
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any StorageReader) async throws -> T) async throws -> T {
        try await base.read(body)
    }

    func observeCommits(_ observer: @escaping @Sendable (CommitNotice) -> Void) {
        base.observeCommits(observer)
    }
}
