import Contracts
import Foundation
import Testing

@testable import SyncServer

@Suite("Conformance: storage")
struct StorageTests {
    @Test("opening applies the server tables and every generated server migration, once", arguments: StorageKind.allCases)
    func opens(_ kind: StorageKind) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-storage-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let schema = StorageKind.uniqueSchema()
        let storage = try await kind.makeSharedStorages(1, in: folder, schema: schema)[0]
        let sequence = try await storage.write { transaction in try await transaction.nextScopeSequence(tenant: "t", scopeKey: "k") }
        #expect(sequence == 1)
        // Opening again (another process) migrates nothing twice and sees the same data.
        let again = try await kind.makeSharedStorages(1, in: folder, schema: schema)[0]
        #expect(try await again.read { try await $0.scopeSequence(tenant: "t", scopeKey: "k") } == 1)
    }

    @Test("a PostgreSQL URL is read with its options, and a bad one is refused with a reason")
    func postgresURL() throws {
        let configuration = try PostgresStorage.Configuration(
            url: "postgresql://sync:s3cret@db.internal:6543/outpost?sslmode=require&schema=sync_a&max_connections=7"
        )
        #expect(configuration.host == "db.internal" && configuration.port == 6543)
        #expect(configuration.username == "sync" && configuration.password == "s3cret" && configuration.database == "outpost")
        #expect(configuration.tls == .require && configuration.schema == "sync_a" && configuration.maximumConnections == 7)
        let plain = try PostgresStorage.Configuration(url: "postgres://outpost@127.0.0.1/outpost")
        #expect(plain.port == 5432 && plain.tls == .disable && plain.schema == nil && plain.password == nil)
        for (url, reason) in [
            ("mysql://u@h/db", "is not a PostgreSQL URL"), ("postgres://h/db", "names no user"), ("postgres://u@h", "names no database"),
            ("postgres://u@h/db?sslmode=maybe", "sslmode must be"), ("postgres://u@h/db?colour=red", "unknown PostgreSQL URL parameter"),
            ("postgres://u@h/db?schema=Bad-Name", "schema must be"),
        ] {
            #expect(throws: PostgresStorage.Configuration.URLError.self, "\(url)") { try PostgresStorage.Configuration(url: url) }
            do {
                _ = try PostgresStorage.Configuration(url: url)
            } catch {
                #expect(error.description.contains(reason), "\(url): \(error.description)")
            }
        }
        #expect(!PostgresStorage.Configuration.redacted("postgres://u:hunter2@h/db").contains("hunter2"))
    }
}
