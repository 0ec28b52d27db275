import Foundation
import NIOConcurrencyHelpers
import OutpostTestSupport
import Testing

@testable import SyncServer

/// A storage call made by a task that is already cancelled (a service stopping, a request whose
/// client went away) ends at once instead of waiting for an answer that never comes.
@Suite("Storage calls from a cancelled task")
struct CancelledStorageTests {
    @Test("a read and a write asked for by a cancelled task end instead of waiting forever", arguments: StorageKind.allCases)
    func cancelledTaskEnds(_ kind: StorageKind) async throws {
        let folder = try TemporaryDirectory(prefix: "cancelled-storage")
        let storage = try await kind.makeStorage(in: folder.url)
        let finished = NIOLockedValueBox(false)
        // Not awaited: a call that never returns must fail the test, not hang it.
        Task {
            withUnsafeCurrentTask { $0?.cancel() }
            _ = try? await storage.read { try await $0.lastSequence(tenant: "acme", clientID: "c") }
            _ = try? await storage.write { try await $0.lastSequence(tenant: "acme", clientID: "c") }
            finished.withLockedValue { $0 = true }
        }
        // Generous: they end at once on a quiet machine, and took over 20 s while CI ran the whole
        // suite on 2 cores; a call that never returns still fails the test.
        let deadline = ContinuousClock.now + .seconds(300)
        while !finished.withLockedValue({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let ended = finished.withLockedValue { $0 }
        #expect(ended, "the calls of a cancelled task never returned")
    }
}
