import Foundation

/// `contracts/contracts.lock`: every released version of every contract, in normalized form with
/// a checksum, and the checksums of every released migration. Written only by `contractc lock`.
package struct LockFile: Sendable {
    /// One released version of a contract.
    package struct Entry: Sendable {
        package var version: Int
        package var checksum: String
        /// The released schema, decoded from the lock; its locations point into the lock file.
        package var contract: Contract
        package var location: SourceLocation
    }

    /// A released migration's identifier and checksum.
    package struct MigrationRecord: Hashable, Sendable {
        package var identifier: String
        package var checksum: String
        package var location: SourceLocation?
    }

    /// A released shape of a subscription: what devices built with it send and hold.
    package struct SubscriptionRecord: Hashable, Sendable {
        /// ``Subscription/shape``.
        package var shape: String
        package var entity: String
        /// The root entity's version when the shape was locked: devices at or below it may use it.
        package var entityVersion: Int
        package var location: SourceLocation?
    }

    package static let currentFormat = 1

    package var path: String
    /// Released versions per contract name, ascending.
    package var contracts: [String: [Entry]]
    package var migrations: [StorageSide: [MigrationRecord]]
    /// Released shapes per subscription name, oldest first.
    package var subscriptions: [String: [SubscriptionRecord]] = [:]

    package init(path: String, contracts: [String: [Entry]] = [:], migrations: [StorageSide: [MigrationRecord]] = [:]) {
        self.path = path
        self.contracts = contracts
        self.migrations = migrations
    }

    /// Every released version as contracts, per contract name, ascending.
    package var history: [String: [Contract]] {
        contracts.mapValues { $0.map(\.contract) }
    }

    // MARK: Reading

    /// Reads the lock. A missing file is an empty lock (nothing released yet); anything
    /// unreadable is a `LOCK_UNREADABLE` diagnostic, and an edited entry `RELEASED_VERSION_MODIFIED`.
    package static func read(path: String, diagnostics: inout DiagnosticCollector) -> LockFile? {
        guard let data = FileManager.default.contents(atPath: path) else {
            return LockFile(path: path)
        }
        var parseDiagnostics = DiagnosticCollector()
        guard let root = YAMLParser().parse([UInt8](data), file: path, diagnostics: &parseDiagnostics) else {
            for diagnostic in parseDiagnostics.diagnostics {
                diagnostics.error(
                    .lockUnreadable, "contracts.lock is not readable: \(diagnostic.message)", at: diagnostic.location,
                    help: "restore it from version control; only `contractc lock` writes it"
                )
            }
            return nil
        }
        var lock = LockFile(path: path)
        func unreadable(_ message: String, _ location: SourceLocation) {
            diagnostics.error(
                .lockUnreadable, "contracts.lock is not readable: \(message)", at: location,
                help: "restore it from version control; only `contractc lock` writes it"
            )
        }
        guard let top = root.mapping else {
            unreadable("expected a mapping", root.location)
            return nil
        }
        func value(_ key: String, in entries: [YAMLNode.Entry]) -> YAMLNode? {
            entries.first { $0.key.scalar == key }?.value
        }
        guard let format = value("format", in: top)?.scalar, Int(format) == currentFormat else {
            unreadable("unknown format (this contractc reads format \(currentFormat))", root.location)
            return nil
        }
        for entry in value("contracts", in: top)?.mapping ?? [] {
            guard let name = entry.key.scalar, let versions = entry.value.sequence else {
                unreadable("malformed contract entry", entry.key.location)
                continue
            }
            var entries: [Entry] = []
            for item in versions {
                guard let fields = item.mapping, let versionText = value("version", in: fields)?.scalar,
                    let version = Int(versionText), let checksum = value("checksum", in: fields)?.scalar,
                    let contractNode = value("contract", in: fields)
                else {
                    unreadable("malformed version entry of \(name)", item.location)
                    continue
                }
                var decoder = ContractDecoder()
                guard let contract = decoder.decodeContract(contractNode, file: path), !decoder.diagnostics.hasErrors,
                    contract.name == name, contract.version == version
                else {
                    let first = decoder.diagnostics.sorted.first { $0.severity == .error }
                    unreadable(
                        "version \(version) of \(name) is not a valid contract" + (first.map { ": \($0.message)" } ?? ""),
                        first?.location ?? item.location)
                    continue
                }
                if ContractSnapshot.checksum(contract) != checksum {
                    diagnostics.error(
                        .releasedVersionModified, "released version \(version) of \(name) was edited in contracts.lock",
                        at: item.location,
                        help: "restore contracts.lock from version control (`git checkout -- \(path)`); only `contractc lock` writes it"
                    )
                }
                entries.append(Entry(version: version, checksum: checksum, contract: contract, location: item.location))
            }
            lock.contracts[name] = entries.sorted { $0.version < $1.version }
        }
        if let migrations = value("migrations", in: top)?.mapping {
            for side in StorageSide.allCases {
                guard let items = value(side.rawValue, in: migrations)?.sequence else { continue }
                lock.migrations[side] = items.compactMap { item in
                    guard let fields = item.mapping, let id = value("id", in: fields)?.scalar,
                        let checksum = value("checksum", in: fields)?.scalar
                    else {
                        unreadable("malformed migration entry", item.location)
                        return nil
                    }
                    return MigrationRecord(identifier: id, checksum: checksum, location: item.location)
                }
            }
        }
        for entry in value("subscriptions", in: top)?.mapping ?? [] {
            guard let name = entry.key.scalar else { continue }
            lock.subscriptions[name] = (entry.value.sequence ?? []).compactMap { item in
                guard let fields = item.mapping, let shape = value("shape", in: fields)?.scalar, let entity = value("entity", in: fields)?.scalar,
                    let version = value("entity_version", in: fields)?.scalar.flatMap({ Int($0) })
                else {
                    unreadable("malformed subscription entry", item.location)
                    return nil
                }
                return SubscriptionRecord(shape: shape, entity: entity, entityVersion: version, location: item.location)
            }
        }
        return lock
    }

    // MARK: Writing

    /// The lock's text: deterministic, one released version after another.
    package func rendered() -> String {
        var lines = [
            "# The released history of every contract, and the checksums of released migrations.",
            "# Written by `contractc lock`; never edit it by hand (`contractc check` verifies the checksums).",
            "format: \(Self.currentFormat)",
            "contracts:",
        ]
        for name in contracts.keys.sorted() {
            lines.append("  \(name):")
            for entry in contracts[name]! {
                lines.append("    - version: \(entry.version)")
                lines.append("      checksum: \(entry.checksum)")
                lines.append("      contract:")
                for line in ContractSnapshot.text(entry.contract).split(separator: "\n") {
                    lines.append("        " + line)
                }
            }
        }
        lines.append("migrations:")
        for side in StorageSide.allCases {
            let records = migrations[side] ?? []
            lines.append("  \(side.rawValue):" + (records.isEmpty ? " []" : ""))
            for record in records {
                lines.append("    - { id: \(DefaultParser.quote(record.identifier)), checksum: \(record.checksum) }")
            }
        }
        if !subscriptions.isEmpty {
            lines.append("subscriptions:")
            for name in subscriptions.keys.sorted() {
                lines.append("  \(name):")
                for record in subscriptions[name]! {
                    lines.append(
                        "    - { entity: \(record.entity), entity_version: \(record.entityVersion), shape: \(DefaultParser.quote(record.shape)) }")
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
