import Foundation
import OutpostTestSupport
import Testing

@testable import SyncServer

/// A storage call made by a task that is already cancelled (a service stopping, a request whose
/// client went away) ends at once instead of waiting for an answer that never comes.
@Suite("Storage calls from a cancelled task")
struct CancelledStorageTests {
    @Test("a read and a write asked for by a cancelled task end within seconds", arguments: StorageKind.allCases)
    func cancelledTaskEnds(_ kind: StorageKind) async throws {
        let folder = try TemporaryDirectory(prefix: "cancelled-storage")
        let storage = try await kind.makeStorage(in: folder.url)
        let calls = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            _ = try? await storage.read { try await $0.lastSequence(tenant: "acme", clientID: "c") }
            _ = try? await storage.write { try await $0.lastSequence(tenant: "acme", clientID: "c") }
        }
        let ended = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await calls.value
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(20))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(ended, "the calls of a cancelled task never returned")
    }
}
