import Contracts
import Foundation
import SyncClient
import Testing

@Test func perfProbe() throws {
    let test = try TestStore()
    let rows = (0..<10_000).map { i in
        Samples.wire(Unit(id: "u-\(i)", title: "Unit \(i)", learnerLevel: .beginner, sortIndex: Int64(i), tags: ["a", "b"], updatedAt: Samples.t0))
    }
    let start = Date()
    try test.store.applyServerChanges(ServerChanges(upserts: ["Unit": rows]))
    print("PROBE apply 10k:", Date().timeIntervalSince(start))
    var times: [Double] = []
    for i in 0..<2000 {
        let t = Date()
        _ = try test.store.fetch(Unit.self, id: "u-\(i * 5)")
        times.append(Date().timeIntervalSince(t))
    }
    times.sort()
    print("PROBE fetch p50:", times[1000] * 1000, "ms p99:", times[1980] * 1000, "ms")
}

@Test func perfProbe2() throws {
    let test = try TestStore()
    let rows = (0..<10_000).map { i in
        Samples.wire(Unit(id: "u-\(i)", title: "Unit \(i)", learnerLevel: .beginner, sortIndex: Int64(i), tags: ["a", "b"], updatedAt: Samples.t0))
    }
    try test.store.applyServerChanges(ServerChanges(upserts: ["Unit": rows]))
    for label in ["wire", "typed", "wire", "typed"] {
        var times: [Double] = []
        for i in 0..<2000 {
            let t = Date()
            if label == "wire" {
                _ = try test.store.read { reader throws(OfflineStoreError) in try reader.wireRow("Unit", id: "u-\(i * 5)") }
            } else {
                _ = try test.store.fetch(Unit.self, id: "u-\(i * 5)")
            }
            times.append(Date().timeIntervalSince(t))
        }
        times.sort()
        print("PROBE \(label) p50:", times[1000] * 1000, "ms p99:", times[1980] * 1000, "ms")
    }
}
