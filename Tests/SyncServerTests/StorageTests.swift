import Contracts
import Foundation
import Testing

@testable import SyncServer

@Suite("SQLite storage")
struct StorageTests {
    @Test("opening applies the server tables and every generated server migration")
    func opens() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-storage-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let storage = try SQLiteStorage(directory: folder)
        let sequence = try await storage.write { transaction in try transaction.nextScopeSequence(tenant: "t", scopeKey: "k") }
        #expect(sequence == 1)
        // Reopening migrates nothing twice.
        _ = try SQLiteStorage(directory: folder)
    }
}
