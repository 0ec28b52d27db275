import Contracts
import Foundation
import OutpostTestSupport
import SyncServer

/// The conformance suite: every service-level test of push, conflict policies, reducers, pull,
/// content and seeding takes a `StorageKind` argument and runs once per storage, on a fresh
/// database of the sample contracts each time.
extension StorageKind {
    func makeStorage(in folder: URL) async throws -> any SyncStorage {
        try await makeStorage(in: folder, contracts: ContractRegistry.self)
    }

    func makeSharedStorages(_ count: Int, in folder: URL, schema: String = uniqueSchema()) async throws -> [any SyncStorage] {
        try await makeSharedStorages(count, in: folder, schema: schema, contracts: ContractRegistry.self)
    }
}
