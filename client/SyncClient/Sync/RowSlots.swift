import ContractRuntime
import Foundation
import GRDB
import SyncProtocol

/// Where each member of an entity's wire row goes: one slot per contract field (in the
/// entity's order), then one for the server's row version (`_server_version`), then one for
/// the version a row carrying only its changed fields changes (`_base_version`).
struct RowSlots: Sendable {
    /// The keys' UTF-8 bytes and their slots, in the order the server writes them (sorted).
    private let keys: [(bytes: [UInt8], slot: Int)]
    private let slotByName: [String: Int]
    let count: Int
    let primaryKey: Int
    let serverVersion: Int
    let baseVersion: Int
    /// The slot of the entity's `int` version field, which stands for the server version when
    /// `_server_version` is absent.
    let intVersionField: Int?

    init(_ entity: EntityDescriptor) {
        var byName: [String: Int] = [:]
        for (index, field) in entity.fields.enumerated() { byName[field.name] = index }
        serverVersion = entity.fields.count
        byName[OfflineStore.serverVersionKey] = serverVersion
        baseVersion = entity.fields.count + 1
        byName[OfflineStore.baseVersionKey] = baseVersion
        slotByName = byName
        count = entity.fields.count + 2
        primaryKey = byName[entity.primaryKey] ?? -1
        intVersionField = entity.versionField.flatMap { name in
            entity.field(named: name)?.kind == .int ? byName[name] : nil
        }
        keys = byName.map { (Array($0.key.utf8), $0.value) }.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
    }

    /// The slot of a key read as raw bytes; `expected` is where the previous key was found, plus
    /// one (rows list their keys in the same order, so the next key is usually there).
    func slot(forKey key: UnsafeBufferPointer<UInt8>, expected: inout Int) -> Int? {
        if expected < keys.count, keys[expected].bytes.elementsEqual(key) {
            expected += 1
            return keys[expected - 1].slot
        }
        guard let found = keys.firstIndex(where: { $0.bytes.elementsEqual(key) }) else { return nil }
        expected = found + 1
        return keys[found].slot
    }

    func slot(named name: String) -> Int? {
        slotByName[name]
    }

    /// The slots of `entity`, worked out once per entity.
    static func of(_ entity: EntityDescriptor) -> RowSlots {
        if let made = cache.withLock({ $0[entity.name] }) { return made }
        let made = RowSlots(entity)
        cache.withLock { $0[entity.name] = made }
        return made
    }

    private static let cache = Locked<[String: RowSlots]>([:])
}
