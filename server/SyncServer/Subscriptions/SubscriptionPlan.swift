import ContractRuntime
import SyncProtocol

/// A subscription with its parameters' values, checked and laid out as the queries that find
/// its rows: the root entity's conditions, then one level per include, parents before children.
///
/// Every query goes through an index the contract compiler derives for the subscription (the
/// filter fields, the foreign keys of `has_many` includes, primary keys), reads keys, `_seq`
/// and foreign keys only, and stops past the subscription's row cap.
struct SubscriptionPlan: Sendable {
    /// One entity the subscription takes rows of, and how they are reached.
    struct Level: Sendable {
        var entity: EntityDescriptor
        /// The level rows are reached from, and through what; `nil` for the root.
        var parent: Int?
        var include: SubscriptionDescriptor.Include?
        /// Foreign keys to read with the level's keys: those its `belongs_to` children follow.
        var carried: [String] = []
    }

    /// A row of the subscription: its level, key, own `_seq` and entry sequence (see
    /// ``SubscriptionService``), with the foreign keys its children follow.
    struct Member: Sendable {
        var level: Int
        var id: String
        /// The row's own `_seq`.
        var seq: Int64
        var entry: Int64
        /// A tombstone: still the subscription's (the device deletes it), but it takes nothing along.
        var deleted = false
        var foreignKeys: [String: String] = [:]
    }

    let subscription: SubscriptionDescriptor
    let scope: ScopeDescriptor
    let levels: [Level]
    let tables: [ContractTable]
    /// The root's conditions: a column and the values it may hold.
    let conditions: [(column: String, values: [String])]

    /// Values beyond this many in one `IN` list go in another statement.
    static let chunk = 500

    /// Checks `parameters` against the subscription's declaration and fills its conditions.
    ///
    /// - Throws: ``ServiceError`` 400 for a missing, unknown or ill-typed parameter.
    init(
        _ subscription: SubscriptionDescriptor, parameters: [String: JSONValue], identity: DeviceIdentity, contracts: ContractCatalog
    ) throws(ServiceError) {
        guard let root = contracts.entity(named: subscription.entity), let scope = contracts.scope(named: root.scope) else {
            throw ServiceError(status: 500, .internalError, "the subscription '\(subscription.name)' names an entity the contracts lack")
        }
        self.subscription = subscription
        self.scope = scope
        for name in parameters.keys.sorted() where subscription.parameter(named: name) == nil {
            let known = subscription.parameters.map(\.name).joined(separator: ", ")
            throw .malformed("the subscription '\(subscription.name)' has no parameter '\(name)'; it takes \(known.isEmpty ? "none" : known)")
        }
        var values: [String: [String]] = [:]
        for parameter in subscription.parameters {
            guard let value = parameters[parameter.name] else {
                throw .malformed("the subscription '\(subscription.name)' needs the parameter '\(parameter.name)' (\(parameter.kind.spelling))")
            }
            values[parameter.name] = try Self.texts(of: value, for: parameter, in: subscription.name)
        }
        var conditions: [(column: String, values: [String])] = []
        for condition in subscription.filter {
            switch condition.operand {
            case .parameter(let name): conditions.append((condition.field, values[name] ?? []))
            case .values(let literals):
                conditions.append((condition.field, literals.compactMap { if case .string(let text) = $0 { text } else { nil } }))
            case .token(let claim):
                switch claim {
                case "user_id": conditions.append((condition.field, [identity.userID]))
                case "device_id": conditions.append((condition.field, [identity.deviceID]))
                default: conditions.append((condition.field, []))
                }
            }
        }
        self.conditions = conditions

        var levels = [Level(entity: root, parent: nil, include: nil)]
        func add(_ includes: [SubscriptionDescriptor.Include], under parent: Int) throws(ServiceError) {
            for include in includes {
                guard let entity = contracts.entity(named: include.target) else {
                    throw ServiceError(status: 500, .internalError, "the subscription '\(subscription.name)' includes an entity the contracts lack")
                }
                if include.kind == .belongsTo { levels[parent].carried.append(include.foreignKey) }
                levels.append(Level(entity: entity, parent: parent, include: include))
                try add(include.includes, under: levels.count - 1)
            }
        }
        try add(subscription.includes, under: 0)
        self.levels = levels
        tables = levels.map { ContractTable($0.entity) }
    }

    /// A parameter's value as the texts it stands for (one, or a list's).
    private static func texts(of value: JSONValue, for parameter: SubscriptionDescriptor.Parameter, in name: String) throws(ServiceError) -> [String]
    {
        func text(_ value: JSONValue, _ kind: FieldKind) throws(ServiceError) -> String {
            guard case .string(let text) = value else {
                throw .malformed("the parameter '\(parameter.name)' of '\(name)' takes \(kind.spelling) values as JSON strings")
            }
            try Identifier.require(text, as: "the parameter '\(parameter.name)'")
            if case .enumeration(let allowed, _) = kind, !allowed.contains(text) {
                throw .malformed("'\(text)' is not one of \(allowed.joined(separator: ", ")) (the parameter '\(parameter.name)' of '\(name)')")
            }
            return text
        }
        if case .list(let element) = parameter.kind {
            guard case .array(let items) = value, !items.isEmpty else {
                throw .malformed("the parameter '\(parameter.name)' of '\(name)' takes a non-empty array")
            }
            guard items.count <= parameter.maxCount else {
                throw .malformed("the parameter '\(parameter.name)' of '\(name)' takes at most \(parameter.maxCount) values; it has \(items.count)")
            }
            var texts: [String] = []
            for item in items { texts.append(try text(item, element)) }
            return Array(Set(texts)).sorted()
        }
        return [try text(value, parameter.kind)]
    }

    // MARK: Rows

    /// The subscription's rows now (keys and entry sequences), and how many are roots.
    ///
    /// - Throws: ``ServiceError`` 400 `subscription_too_broad` when they are more than `cap`.
    func members(in reader: any StorageReader, tenant: String, scopeKey: String, cap: Int) async throws -> (all: [Member], roots: Int) {
        var byLevel: [[Member]] = Array(repeating: [], count: levels.count)
        var total = 0
        func tooBroad() -> ServiceError {
            ServiceError(
                status: 400, .subscriptionTooBroad,
                "the subscription '\(subscription.name)' selects more than \(cap) rows; subscribe to something narrower",
                details: .object(["limit": .int(Int64(cap))]))
        }
        // The root: every condition at once.
        let found = try await keys(
            in: reader, level: 0, tenant: tenant, scopeKey: scopeKey, conditions: conditions, limit: cap + 1)
        guard found.count <= cap else { throw tooBroad() }
        byLevel[0] = found.map { Member(level: 0, id: $0.id, seq: $0.seq, entry: $0.seq, deleted: $0.deleted, foreignKeys: $0.foreignKeys) }
        total = found.count
        for index in levels.indices.dropFirst() {
            let level = levels[index]
            guard let parent = level.parent, let include = level.include else { continue }
            let parents = byLevel[parent].filter { !$0.deleted }
            guard !parents.isEmpty else { continue }
            var members: [String: Member] = [:]
            switch include.kind {
            case .hasMany:
                var entries: [String: Int64] = [:]
                for member in parents { entries[member.id] = max(entries[member.id] ?? 0, member.entry) }
                for part in Array(entries.keys).sorted().chunked(Self.chunk) {
                    let rows = try await keys(
                        in: reader, level: index, tenant: tenant, scopeKey: scopeKey, conditions: [(include.foreignKey, part)],
                        extra: [include.foreignKey], limit: cap + 1 - total)
                    for row in rows {
                        let through = row.foreignKeys[include.foreignKey].flatMap { entries[$0] } ?? 0
                        members[row.id] = Member(
                            level: index, id: row.id, seq: row.seq, entry: max(row.seq, through), deleted: row.deleted, foreignKeys: row.foreignKeys)
                    }
                    guard total + members.count <= cap else { throw tooBroad() }
                }
            case .belongsTo:
                var entries: [String: Int64] = [:]
                for member in parents {
                    if let target = member.foreignKeys[include.foreignKey] { entries[target] = max(entries[target] ?? 0, member.entry) }
                }
                for part in Array(entries.keys).sorted().chunked(Self.chunk) {
                    let rows = try await keys(
                        in: reader, level: index, tenant: tenant, scopeKey: scopeKey, conditions: [(level.entity.primaryKey, part)],
                        limit: cap + 1 - total)
                    for row in rows {
                        members[row.id] = Member(
                            level: index, id: row.id, seq: row.seq, entry: max(row.seq, entries[row.id] ?? 0), deleted: row.deleted,
                            foreignKeys: row.foreignKeys)
                    }
                    guard total + members.count <= cap else { throw tooBroad() }
                }
            }
            byLevel[index] = members.values.sorted { $0.id < $1.id }
            total += members.count
        }
        // A row reached at two levels (or twice) is one row: it enters at the later entry.
        var unique: [String: Member] = [:]
        for member in byLevel.joined() {
            let key = tables[member.level].name + "\u{1}" + member.id
            if let seen = unique[key], seen.entry >= member.entry { continue }
            unique[key] = member
        }
        return (Array(unique.values), byLevel[0].count)
    }

    /// A row of a key query.
    struct Key {
        var id: String
        var seq: Int64
        var deleted: Bool
        var foreignKeys: [String: String]
    }

    /// Keys, `_seq` and carried foreign keys of a level's rows in the scope meeting `conditions`
    /// (each column holds one of its values), at most `limit`. Tombstones included: a deleted
    /// row is still the subscription's, to be deleted on the device.
    private func keys(
        in reader: any StorageReader, level index: Int, tenant: String, scopeKey: String, conditions: [(column: String, values: [String])],
        extra: [String] = [], limit: Int
    ) async throws -> [Key] {
        let level = levels[index]
        guard limit > 0, conditions.allSatisfy({ !$0.values.isEmpty }) else { return [] }
        let carried = Array(Set(level.carried + extra)).sorted()
        let columns = ["\(Self.quoted(level.entity.primaryKey)) AS \"k\"", "\"_seq\" AS \"s\"", "\"_deleted\" AS \"d\""] + carried.map(Self.quoted)
        var clauses = ["\"_tenant_id\" = ?", "\"_scope_key\" = ?"]
        var arguments: [ColumnValue] = [.text(tenant), .text(scopeKey)]
        for (column, values) in conditions {
            clauses.append("\(Self.quoted(column)) IN (\(Array(repeating: "?", count: values.count).joined(separator: ", ")))")
            arguments += values.map(ColumnValue.text)
        }
        arguments.append(.integer(Int64(limit)))
        let sql =
            "SELECT \(columns.joined(separator: ", ")) FROM \(Self.quoted(level.entity.table)) WHERE \(clauses.joined(separator: " AND ")) LIMIT ?"
        return try await reader.serverTableQuery(sql, arguments).compactMap { row in
            guard let id = row.text("k"), let seq = row.integer("s") else { return nil }
            var foreignKeys: [String: String] = [:]
            for column in carried { if let value = row.text(column) { foreignKeys[column] = value } }
            return Key(id: id, seq: seq, deleted: row.integer("d") == 1, foreignKeys: foreignKeys)
        }
    }

    /// When a subscription that names its root rows by primary key finds none in `scopeKey`: a
    /// refusal if such a row lives in a scope key the token may not read (nothing of it is
    /// sent), `nil` when the rows simply do not exist (yet).
    func readElsewhere(in reader: any StorageReader, tenant: String, scopeKey: String, identity: DeviceIdentity) async throws -> ServiceError? {
        let root = levels[0].entity
        guard let ids = conditions.first(where: { $0.column == root.primaryKey })?.values, !ids.isEmpty else { return nil }
        let sql =
            "SELECT DISTINCT \"_scope_key\" AS \"key\" FROM \(Self.quoted(root.table)) WHERE \"_tenant_id\" = ? AND \(Self.quoted(root.primaryKey)) IN ("
            + Array(repeating: "?", count: ids.count).joined(separator: ", ") + ")"
        let keys = try await reader.serverTableQuery(sql, [.text(tenant)] + ids.map(ColumnValue.text)).compactMap { $0.text("key") }
        guard keys.contains(where: { $0 != scopeKey && !ScopeAccess.canRead($0, in: scope, identity: identity) }) else { return nil }
        return .forbidden("this token may not read the \(root.name) the subscription '\(subscription.name)' names")
    }

    // MARK: Leaves

    /// The rows that left the subscription between `after` and `through` and are not its rows
    /// now: a root whose filter field moved off its values, a row whose foreign key moved off a
    /// parent, and what those took along (at most `cap` of them per parent level read, as the
    /// subscription holds no more). By contract name.
    func leaves(
        in reader: any StorageReader, members: [Member], tenant: String, scopeKey: String, after: Int64, through: Int64, cap: Int
    ) async throws -> [String: Set<String>] {
        guard through > after else { return [:] }
        var current: [Int: Set<String>] = [:]
        var currentByTable: [String: Set<String>] = [:]
        var leaving: [Int: Set<String>] = [:]
        for member in members {
            currentByTable[tables[member.level].name, default: []].insert(member.id)
            // A row deleted since the cursor is sent as a delete; what it took along leaves with it.
            if member.deleted {
                if member.seq > after { leaving[member.level, default: []].insert(member.id) }
            } else {
                current[member.level, default: []].insert(member.id)
            }
        }
        let moves = RowMoves(reader: reader, tenant: tenant, scopeKey: scopeKey, after: after, through: through)
        for (column, values) in conditions {
            leaving[0, default: []].formUnion(try await moves.rows(in: tables[0].name, column: column, from: values))
        }
        for index in levels.indices.dropFirst() {
            guard let parent = levels[index].parent, let include = levels[index].include else { continue }
            let parents = Array(current[parent] ?? [])
            let departed = Array(leaving[parent] ?? [])
            switch include.kind {
            case .hasMany:
                // Rows whose foreign key moved off a parent that is still here, and the rows of parents that left.
                leaving[index, default: []].formUnion(try await moves.rows(in: tables[index].name, column: include.foreignKey, from: parents))
                for part in departed.sorted().chunked(Self.chunk) {
                    let rows = try await keys(
                        in: reader, level: index, tenant: tenant, scopeKey: scopeKey, conditions: [(include.foreignKey, part)], limit: cap + 1)
                    leaving[index, default: []].formUnion(rows.map(\.id))
                }
            case .belongsTo:
                // Rows a parent that is still here stopped naming, and those the parents that left named.
                leaving[index, default: []].formUnion(
                    try await moves.previousValues(in: tables[parent].name, column: include.foreignKey, rows: parents))
                for part in departed.sorted().chunked(Self.chunk) {
                    let rows = try await keys(
                        in: reader, level: parent, tenant: tenant, scopeKey: scopeKey, conditions: [(levels[parent].entity.primaryKey, part)],
                        extra: [include.foreignKey], limit: cap + 1)
                    leaving[index, default: []].formUnion(rows.compactMap { $0.foreignKeys[include.foreignKey] })
                }
            }
        }
        var result: [String: Set<String>] = [:]
        for (index, ids) in leaving {
            let left = ids.subtracting(currentByTable[tables[index].name] ?? [])
            if !left.isEmpty { result[levels[index].entity.name, default: []].formUnion(left) }
        }
        return result
    }

    static func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
}

extension Array {
    /// The array in runs of at most `size` elements.
    func chunked(_ size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
