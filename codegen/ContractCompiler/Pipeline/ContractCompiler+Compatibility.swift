import Foundation

extension ContractCompiler {
    /// What `contractc check` found.
    public struct CheckResult: Sendable {
        /// Every compatibility problem found, and the validation ones of the new contracts.
        public var diagnostics: DiagnosticCollector
        /// Allowances that excused a finding, for the report.
        public var allowancesInForce: [String]
        /// How many contracts have released versions to compare with.
        public var releasedContracts: Int
        /// The released `oldest_supported` of every contract compared (its latest released
        /// version's, or the compared revision's), by name: what the rollout gate
        /// (``FleetGate/evaluate(_:releasedOldestSupported:census:maxCutoff:)``) measures a raise from.
        public var releasedOldestSupported: [String: Int] = [:]
    }

    /// The default lock path for a contracts folder.
    public static func defaultLockPath(contracts directory: String) -> String {
        ContractLoader.join(directory, "contracts.lock")
    }

    /// The released history recorded in a lock (empty when there is no lock file yet).
    public static func history(lockPath: String, diagnostics: inout DiagnosticCollector) -> [String: [Contract]] {
        LockFile.read(path: lockPath, diagnostics: &diagnostics)?.history ?? [:]
    }

    /// Checks the contracts against the lock: released versions unchanged, new versions
    /// compatible with every supported released version, released migrations unchanged.
    public static func check(_ set: ContractSet, lockPath: String) -> CheckResult {
        var diagnostics = DiagnosticCollector()
        guard let lock = LockFile.read(path: lockPath, diagnostics: &diagnostics) else {
            return CheckResult(diagnostics: diagnostics, allowancesInForce: [], releasedContracts: 0)
        }
        var result = check(set, lock: lock)
        diagnostics.append(contentsOf: result.diagnostics)
        result.diagnostics = diagnostics
        return result
    }

    /// ``check(_:lockPath:)`` with the lock already read.
    package static func check(_ set: ContractSet, lock: LockFile) -> CheckResult {
        var diagnostics = DiagnosticCollector()
        let set = set.resolvingSince(history: lock.history)
        var checker = CompatibilityChecker(set: set, lock: lock)
        checker.run()
        diagnostics.append(contentsOf: checker.diagnostics)
        checkReleasedMigrations(set, lock: lock, skipping: checker.contractsWithVersionErrors, diagnostics: &diagnostics)
        checkSubscriptions(set, lock: lock, diagnostics: &diagnostics)
        return CheckResult(
            diagnostics: diagnostics, allowancesInForce: describe(checker.applied), releasedContracts: lock.contracts.count,
            releasedOldestSupported: lock.contracts.compactMapValues { $0.last?.contract.oldestSupported }
        )
    }

    /// Checks the contracts against the contracts of another folder (for example a git revision's).
    public static func check(_ set: ContractSet, against previous: ContractSet) -> CheckResult {
        let set = set.resolvingSince(history: Dictionary(uniqueKeysWithValues: previous.contracts.map { ($0.name, [$0]) }))
        var checker = CompatibilityChecker(set: set, previous: previous)
        checker.run()
        return CheckResult(
            diagnostics: checker.diagnostics, allowancesInForce: describe(checker.applied),
            releasedContracts: previous.contracts.count,
            releasedOldestSupported: Dictionary(previous.contracts.map { ($0.name, $0.oldestSupported) }) { first, _ in first }
        )
    }

    /// A released subscription is a contract of its own: removing it, or changing what it
    /// selects, is refused while a device built with it is still served (its root entity's
    /// `oldest_supported` is not above the version its shape was locked at).
    private static func checkSubscriptions(_ set: ContractSet, lock: LockFile, diagnostics: inout DiagnosticCollector) {
        for name in lock.subscriptions.keys.sorted() {
            guard let released = lock.subscriptions[name]?.last else { continue }
            let oldestSupported = set.contract(named: released.entity)?.oldestSupported ?? Int.max
            guard oldestSupported <= released.entityVersion else { continue }
            let help =
                "devices at \(released.entity) version \(released.entityVersion) use it; keep it until `oldest_supported` of \(released.entity) is above \(released.entityVersion), and add a new subscription beside it"
            guard let current = set.manifest.subscriptions.first(where: { $0.name == name }) else {
                diagnostics.error(
                    .subscriptionRemoved, "subscription '\(name)' was removed while devices that use it are supported",
                    at: .startOf(set.manifest.file), help: help)
                continue
            }
            if current.shape != released.shape {
                diagnostics.error(
                    .subscriptionChanged,
                    "subscription '\(name)' changed what it selects while devices that use it are supported: "
                        + "it was `\(released.shape)`, it is `\(current.shape)`",
                    at: current.location, help: help)
            }
        }
    }

    private static func describe(_ applied: [CompatibilityChecker.AppliedAllowance]) -> [String] {
        applied.map { item in
            let target = item.field.map { "\(item.contract).\($0)" } ?? item.contract
            return
                "\(item.allowance.location): \(item.allowance.rule.rawValue) allowed on \(target) until \(item.allowance.until): \(item.allowance.reason)"
        }
    }

    private static func checkReleasedMigrations(
        _ set: ContractSet, lock: LockFile, skipping: Set<String>, diagnostics: inout DiagnosticCollector
    ) {
        let planner = MigrationPlanner(set: set, history: lock.history)
        for side in StorageSide.allCases {
            let generated = Dictionary(uniqueKeysWithValues: planner.migrations(side: side).map { ($0.identifier, $0.checksum) })
            for record in lock.migrations[side] ?? [] {
                let contractName = lock.contracts.first { _, entries in
                    entries.contains { record.identifier.hasPrefix($0.contract.table + ".") }
                }?.key
                // A deleted contract, or one whose released version changed, is reported as such;
                // its migrations differ as a consequence.
                if let contractName, set.contract(named: contractName) == nil || skipping.contains(contractName) { continue }
                // An index a subscription needed is derived no more once no subscription needs
                // it (one was removed, a declared index now serves it, a rebuild named a new
                // step): servers that made it keep it, new ones do without. Only its SQL is fixed.
                if generated[record.identifier] == nil, record.identifier.hasSuffix(SubscriptionGenerator.indexStepSuffix) { continue }
                guard let checksum = generated[record.identifier] else {
                    diagnostics.error(
                        .releasedMigrationModified, "released \(side.rawValue) migration '\(record.identifier)' is no longer generated",
                        at: record.location ?? .startOf(lock.path),
                        help:
                            "undo the change that removed it; released migrations stay in the history (see `contractc explain RELEASED_MIGRATION_MODIFIED`)"
                    )
                    continue
                }
                if checksum != record.checksum {
                    diagnostics.error(
                        .releasedMigrationModified, "released \(side.rawValue) migration '\(record.identifier)' would change",
                        at: record.location ?? .startOf(lock.path),
                        help:
                            "undo the change to the generator or the released contract; express changes as a new version (see `contractc explain RELEASED_MIGRATION_MODIFIED`)"
                    )
                }
            }
        }
    }

    /// What `contractc lock` recorded.
    public struct LockSummary: Sendable {
        /// What was newly recorded as released, as `contractc lock` prints it (`Unit v3`, `subscription incident`).
        public var newVersions: [String]
        /// Whether the lock file was written (a lock with nothing new is left untouched).
        public var wrote: Bool
    }

    /// Records every current version that is not yet in the lock, and the checksums of every
    /// migration up to them. Refuses (returns diagnostics) when `check` finds any error, so a
    /// released version is never overwritten and an incompatible one never released.
    public static func lock(_ set: ContractSet, lockPath: String) -> (summary: LockSummary?, diagnostics: DiagnosticCollector) {
        let result = check(set, lockPath: lockPath)
        var diagnostics = result.diagnostics
        guard !diagnostics.hasErrors, var lock = LockFile.read(path: lockPath, diagnostics: &diagnostics) else {
            return (nil, diagnostics)
        }
        let set = set.resolvingSince(history: lock.history)
        var added: [String] = []
        for contract in set.contracts {
            var entries = lock.contracts[contract.name] ?? []
            guard !entries.contains(where: { $0.version == contract.version }) else { continue }
            entries.append(
                LockFile.Entry(
                    version: contract.version, checksum: ContractSnapshot.checksum(contract), contract: contract, location: contract.location)
            )
            lock.contracts[contract.name] = entries.sorted { $0.version < $1.version }
            added.append("\(contract.name) v\(contract.version)")
        }
        for subscription in set.manifest.subscriptions {
            var records = lock.subscriptions[subscription.name] ?? []
            guard records.last?.shape != subscription.shape else { continue }
            records.append(
                LockFile.SubscriptionRecord(
                    shape: subscription.shape, entity: subscription.entity, entityVersion: set.contract(named: subscription.entity)?.version ?? 1))
            lock.subscriptions[subscription.name] = records
            added.append("subscription \(subscription.name)")
        }
        let planner = MigrationPlanner(set: set, history: lock.history)
        for side in StorageSide.allCases {
            lock.migrations[side] = planner.migrations(side: side).map {
                LockFile.MigrationRecord(identifier: $0.identifier, checksum: $0.checksum, location: nil)
            }
        }
        let text = lock.rendered()
        let current = FileManager.default.contents(atPath: lockPath).map { String(decoding: $0, as: UTF8.self) }
        guard current != text else { return (LockSummary(newVersions: [], wrote: false), diagnostics) }
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: lockPath), options: .atomic)
        } catch {
            diagnostics.error(.lockUnreadable, "cannot write \(lockPath): \(error)", at: .startOf(lockPath), help: "check the folder's permissions")
            return (nil, diagnostics)
        }
        return (LockSummary(newVersions: added, wrote: true), diagnostics)
    }
}
