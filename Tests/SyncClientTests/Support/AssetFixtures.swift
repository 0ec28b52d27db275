import ContractRuntime
import Contracts
import Foundation
import SyncClient
import SyncServer

/// The bytes of a sample file: not uniform, so a range put at the wrong offset changes the checksum.
func sampleBytes(_ count: Int, seed: Int = 0) -> Data {
    Data((0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 7) ^ ($0 >> 8) &+ seed) })
}

extension OfflineStore {
    /// Stores a unit with one lesson and one `Asset` row for `data`, as a pull would: the device
    /// knows the file, but has no download record of it.
    func storeAssetRow(unitId: String, lessonId: String, assetId: String, data: Data) throws {
        let checksum = Hex.sha256(data)
        try applyServerChanges(
            ServerChanges(upserts: [
                "Unit": [Samples.wire(Unit(id: unitId, title: "Unit \(unitId)", learnerLevel: .beginner, updatedAt: Samples.t0))],
                "Lesson": [Samples.wire(Lesson(id: lessonId, unitId: unitId, title: "L", sortIndex: 0, lessonKind: .audio, updatedAt: Samples.t0))],
                "Asset": [
                    Samples.wire(
                        Asset(
                            id: assetId, lessonId: lessonId, assetKind: .audio, contentType: "audio/wav", sizeBytes: Int64(data.count),
                            checksum: checksum, storageKey: checksum, updatedAt: Samples.t0
                        ))
                ],
            ]))
    }
}
