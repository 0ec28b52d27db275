public import ContractRuntime
import Foundation
import NIOConcurrencyHelpers
import PostgresNIO

/// The storage for several server processes on one PostgreSQL database (postgres-nio).
///
/// Every process opens the same database; the first to start applies the server's own tables
/// and the generated PostgreSQL migrations (the catalog's `serverPostgresMigrations`), the
/// others wait for it and find them applied. Write transactions run in `READ COMMITTED` with
/// explicit row locks (client, scope, audit head; see `PostgresTransaction` and
/// docs/scaling.md); a transaction that meets a deadlock, a serialization failure or a
/// concurrent insert of the same key is rolled back and run again, up to
/// ``Configuration/maximumAttempts`` times. Reads run in one `REPEATABLE READ` snapshot.
///
/// ```swift
/// let storage = try await PostgresStorage(
///     configuration: .init(url: "postgres://outpost@127.0.0.1:5432/outpost"), contracts: ContractRegistry.self
/// )
/// defer { Task { await storage.close() } }
/// let push = PushService(storage: storage)
/// ```
public final class PostgresStorage: ServerStorage, SyncStorage {
    /// Where the database is and how to use it.
    public struct Configuration: Sendable {
        /// The database server's host name or address.
        public var host: String
        /// The database server's port.
        public var port: Int
        /// The role to connect as.
        public var username: String
        /// The role's password, if it needs one.
        public var password: String?
        /// The database's name.
        public var database: String
        /// `disable` (the default, for a database on the same host or a private network),
        /// `prefer`, or `require` (TLS with the certificate verified).
        public var tls: TLSMode
        /// The schema the tables live in (created if missing); `nil` for the server's default
        /// (`public`). Tests give each storage its own.
        public var schema: String?
        /// Connections this process keeps to the database at most.
        public var maximumConnections: Int
        /// How many times a write transaction runs before a conflict is reported as a failure.
        public var maximumAttempts: Int
        /// The longest a request waits for a connection. While the database cannot be reached
        /// the pool keeps trying to connect; a request that gets no connection in this time
        /// fails as unavailable (503 `storage_unavailable` with `Retry-After`) instead of
        /// waiting with it.
        public var connectionWait: Duration = .seconds(5)
        /// The planner's cost of reading a page out of order (`random_page_cost`) on this
        /// server's sessions: 1.1, for a database whose hot indexes are in memory or on SSD.
        /// PostgreSQL's default of 4.0 models a spinning disk, and with it a push's lookup of
        /// 500 keys scans the whole table while the table holds between a few thousand and about
        /// 40 000 rows (2.5 ms against 0.8 ms by the index at 20 000 rows, and growing with the
        /// table; docs/scaling.md). `nil` keeps the database's own setting.
        public var randomPageCost: Double? = 1.1
        /// The key the audit log is sealed with; `nil` takes `OUTPOST_AUDIT_KEY` (and fails
        /// without it). Every process on one database needs the same key.
        public var auditKey: AuditKey?

        /// Whether the connection uses TLS: never, when the server offers it, or always.
        public enum TLSMode: String, Sendable {
            case disable
            case prefer
            case require
        }

        /// A configuration of the database `database` at `host`; the rest have defaults.
        public init(
            host: String, port: Int = 5432, username: String, password: String? = nil, database: String, tls: TLSMode = .disable,
            schema: String? = nil, maximumConnections: Int = 10, maximumAttempts: Int = 8
        ) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
            self.database = database
            self.tls = tls
            self.schema = schema
            self.maximumConnections = maximumConnections
            self.maximumAttempts = maximumAttempts
        }

        /// Reads a URL such as `postgres://user:password@host:5432/database?sslmode=disable`
        /// (`postgresql://` too). Query items: `sslmode` (`disable`, `prefer`, `require`),
        /// `schema`, `max_connections`, `connect_wait` (seconds, ``connectionWait``),
        /// `random_page_cost` (a number, or `default` for the database's own; ``randomPageCost``).
        public init(url text: String) throws(URLError) {
            guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme ?? ""),
                let host = components.host, !host.isEmpty
            else {
                throw URLError("'\(Self.redacted(text))' is not a PostgreSQL URL such as postgres://user@127.0.0.1:5432/outpost")
            }
            let database = String(components.path.drop { $0 == "/" })
            guard let user = components.user, !user.isEmpty else { throw URLError("the PostgreSQL URL names no user (postgres://USER@host/db)") }
            guard !database.isEmpty else { throw URLError("the PostgreSQL URL names no database (postgres://user@host/DATABASE)") }
            self.init(host: host, port: components.port ?? 5432, username: user, password: components.password, database: database)
            for item in components.queryItems ?? [] {
                switch item.name {
                case "sslmode":
                    guard let mode = TLSMode(rawValue: item.value ?? "") else {
                        throw URLError("sslmode must be disable, prefer or require, not '\(item.value ?? "")'")
                    }
                    tls = mode
                case "schema":
                    schema = item.value
                case "max_connections":
                    guard let count = item.value.flatMap(Int.init), count > 0 else { throw URLError("max_connections must be a positive number") }
                    maximumConnections = count
                case "connect_wait":
                    guard let seconds = item.value.flatMap(Double.init), seconds > 0, seconds <= 600 else {
                        throw URLError("connect_wait must be a number of seconds above 0 and at most 600")
                    }
                    connectionWait = .milliseconds(Int64((seconds * 1000).rounded()))
                case "random_page_cost":
                    if item.value == "default" {
                        randomPageCost = nil
                    } else {
                        guard let cost = item.value.flatMap(Double.init), cost > 0, cost <= 1000 else {
                            throw URLError("random_page_cost must be a number above 0 and at most 1000, or 'default'")
                        }
                        randomPageCost = cost
                    }
                default:
                    throw URLError(
                        "unknown PostgreSQL URL parameter '\(item.name)' (known: sslmode, schema, max_connections, connect_wait, random_page_cost)")
                }
            }
            if let schema, !Self.isIdentifier(schema) {
                throw URLError("schema must be a lowercase identifier (letters, digits, _), not '\(schema)'")
            }
        }

        /// `application_name` of the connections: `outpost-sync-server`, with the schema when one is given.
        public var applicationName: String { "outpost-sync-server" + (schema.map { ":" + $0 } ?? "") }

        /// A PostgreSQL URL the server cannot use.
        public struct URLError: Error, CustomStringConvertible {
            /// What is wrong with the URL.
            public var description: String
            init(_ description: String) { self.description = description }
        }

        static func isIdentifier(_ name: String) -> Bool {
            guard let first = name.unicodeScalars.first, !name.isEmpty, name.count <= 63 else { return false }
            let lower = CharacterSet.lowercaseLetters.union(CharacterSet(charactersIn: "_"))
            return lower.contains(first) && name.unicodeScalars.allSatisfy { lower.contains($0) || CharacterSet.decimalDigits.contains($0) }
        }

        /// The URL with its password replaced, for messages.
        static func redacted(_ text: String) -> String {
            guard var components = URLComponents(string: text), components.password != nil else { return text }
            components.password = "***"
            return components.string ?? text
        }
    }

    /// The environment variable `sync-server` reads a PostgreSQL URL from.
    public static let environmentVariable = "OUTPOST_POSTGRES_URL"

    private let client: PostgresClient
    private let running: Task<Void, Never>
    private let catalog: PostgresCatalog
    private let logger: Logger
    private let maximumAttempts: Int
    private let connectionWait: Duration
    /// The key the audit log is sealed with.
    public let auditKey: AuditKey
    /// The contracts the database holds tables for.
    public let contracts: ContractCatalog
    /// The storage as the services use it.
    public var backend: StorageBackend { StorageBackend(self) }
    private let commitObservers = CommitObservers()
    private let statistics = PostgresTableStatistics()
    private let notificationChannel: String
    /// The task that listens for every process's commits, started by the first observer.
    private let listening = NIOLockedValueBox<Task<Void, Never>?>(nil)

    /// Connects, applies the migrations the database lacks, and reads the column types.
    /// Fails when the database cannot be reached or a released migration was changed.
    public convenience init(configuration: Configuration, contracts: any ContractSchema.Type) async throws {
        try await self.init(configuration: configuration, contracts: ContractCatalog(contracts))
    }

    /// Connects for the contracts of `contracts`, applies the migrations the database lacks, and
    /// reads the column types.
    public init(configuration: Configuration, contracts: ContractCatalog) async throws {
        self.contracts = contracts
        let key = try configuration.auditKey ?? AuditKey.resolve(file: nil, dataDirectory: nil)
        var clientConfiguration = PostgresClient.Configuration(
            host: configuration.host, port: configuration.port, username: configuration.username, password: configuration.password,
            database: configuration.database, tls: try Self.tls(configuration.tls)
        )
        clientConfiguration.options.maximumConnections = configuration.maximumConnections
        // The application name tells the server's sessions apart in pg_stat_activity.
        clientConfiguration.options.additionalStartupParameters = [("application_name", configuration.applicationName)]
        if let schema = configuration.schema {
            clientConfiguration.options.additionalStartupParameters.append(("search_path", schema))
        }
        if let cost = configuration.randomPageCost {
            clientConfiguration.options.additionalStartupParameters.append(("random_page_cost", String(cost)))
        }
        var logger = Logger(label: "outpost.postgres")
        logger.logLevel = .error
        let client = PostgresClient(configuration: clientConfiguration, backgroundLogger: logger)
        let running = Task { await client.run() }
        do {
            try await PostgresMigrator(schema: configuration.schema, contracts: contracts, logger: logger).migrate(client)
            try await Self.claimAuditHead(client, key: key, logger: logger)
            catalog = try await Self.readCatalog(client, logger: logger)
        } catch {
            running.cancel()
            await running.value
            throw error
        }
        self.client = client
        self.running = running
        self.logger = logger
        self.maximumAttempts = max(1, configuration.maximumAttempts)
        self.connectionWait = configuration.connectionWait
        notificationChannel = CommitNotification.channel(schema: configuration.schema)
        self.auditKey = key
    }

    /// Records the key's fingerprint and seals the head the first time a keyed storage opens the
    /// log (under the head's row lock, so two processes starting together agree); refuses a key
    /// of another fingerprint afterwards.
    private static func claimAuditHead(_ client: PostgresClient, key: AuditKey, logger: Logger) async throws {
        try await client.withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            do {
                let rows = try await connection.query(
                    "SELECT last_id, last_hash, keyed_from, key_fingerprint FROM audit_head WHERE singleton FOR UPDATE", logger: logger
                ).collect()
                if let row = rows.first {
                    let (lastID, lastHash, keyedFrom, fingerprint) = try row.decode((Int64, String, Int64, String?).self)
                    if let fingerprint {
                        guard fingerprint == key.fingerprint else { throw AuditKeyError.mismatch(expected: fingerprint, actual: key.fingerprint) }
                    } else {
                        let seal = AuditChain.seal(lastID: lastID, lastHash: lastHash, keyedFrom: keyedFrom, key: key)
                        try await connection.query(
                            "UPDATE audit_head SET key_fingerprint = \(key.fingerprint), seal = \(seal) WHERE singleton", logger: logger
                        )
                    }
                }
                try await connection.query("COMMIT", logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// Closes every connection and waits until they are closed. The storage cannot be used
    /// afterwards. (Releasing the storage closes them too, without waiting.)
    public func close() async {
        let listener = listening.withLockedValue { $0 }
        listener?.cancel()
        running.cancel()
        await running.value
        await listener?.value
    }

    deinit {
        listening.withLockedValue { $0 }?.cancel()
        running.cancel()
    }

    package func observeCommits(_ observer: @escaping @Sendable (CommitNotice) -> Void) {
        commitObservers.add(observer)
        listening.withLockedValue { task in
            guard task == nil else { return }
            task = Task { [client, logger, commitObservers, notificationChannel] in
                await Self.listen(client: client, channel: notificationChannel, observers: commitObservers, logger: logger)
            }
        }
    }

    /// Holds one pooled connection in `LISTEN` for as long as the storage is open, and hands every
    /// commit's notification to the observers; reconnects after a failure with a growing pause
    /// (up to 5 s), and says ``CommitNotice/mayHaveMissed`` each time it listens again.
    private static func listen(client: PostgresClient, channel: String, observers: CommitObservers, logger: Logger) async {
        var pause = Duration.milliseconds(100)
        while !Task.isCancelled {
            let started = ContinuousClock.now
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: channel) { notifications in
                        observers.notify(.mayHaveMissed)
                        for try await notification in notifications {
                            let changes = CommitNotification.changes(in: notification.payload)
                            if !changes.isEmpty { observers.notify(.changed(changes)) }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                // A connection that listened for a while failed: start again from a short pause.
                if ContinuousClock.now - started > .seconds(30) { pause = .milliseconds(100) }
                logger.warning("listening for commits failed, listening again in \(pause): \(String(reflecting: error))")
            }
            try? await Task.sleep(for: pause)
            pause = min(pause * 2, .seconds(5))
        }
    }

    private static func tls(_ mode: Configuration.TLSMode) throws -> PostgresClient.Configuration.TLS {
        switch mode {
        case .disable: return .disable
        case .prefer: return .prefer(.makeClientConfiguration())
        case .require: return .require(.makeClientConfiguration())
        }
    }

    private static func readCatalog(_ client: PostgresClient, logger: Logger) async throws -> PostgresCatalog {
        let rows = try await client.query(
            """
            SELECT c.relname::TEXT, a.attname::TEXT, a.atttypid::BIGINT
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
            """, logger: logger
        ).collect()
        var tables: [String: [String: PostgresDataType]] = [:]
        for row in rows {
            let (table, column, type) = try row.decode((String, String, Int64).self)
            tables[table, default: [:]][column] = PostgresDataType(UInt32(type))
        }
        return PostgresCatalog(tables: tables)
    }

    // MARK: - SyncStorage

    package func write<T: Sendable>(_ body: @escaping @Sendable (any StorageTransaction) async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await transaction(
                    "BEGIN ISOLATION LEVEL READ COMMITTED",
                    { transaction in
                        let result = try await body(transaction)
                        try await transaction.finish()
                        return result
                    },
                    committed: { transaction in self.keepStatistics(afterSending: transaction.sentRowCounts) }
                )
            } catch  where Self.isTransient(error) {
                guard attempt < maximumAttempts else { throw PostgresStorageError.tooManyConflicts(attempts: attempt) }
                // Back off a little, with jitter, so the transactions that collided do not collide again.
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...(5 << min(attempt, 5)))))
                attempt += 1
            }
        }
    }

    package func read<T: Sendable>(_ body: @escaping @Sendable (any StorageReader) async throws -> T) async throws -> T {
        // One snapshot for every statement: a page of changes read table by table must not see
        // a commit between two of its statements.
        try await transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") { try await body($0) }
    }

    package func readOneStatement<T: Sendable>(_ body: @escaping @Sendable (any StorageReader) async throws -> T) async throws -> T {
        // No BEGIN and COMMIT: two round trips of three for the statement every request runs
        // (the token's identity state).
        try await leased { [self] connection in try await body(self.transaction(on: connection)) }
    }

    /// The storage's transaction state on a leased connection (its statements, not its `BEGIN`).
    private func transaction(on connection: PostgresConnection) -> PostgresTransaction {
        PostgresTransaction(connection: connection, catalog: catalog, logger: logger, auditKey: auditKey, notificationChannel: notificationChannel)
    }

    private func transaction<T: Sendable>(
        _ begin: PostgresQuery, _ body: @escaping @Sendable (PostgresTransaction) async throws -> T,
        committed: @escaping @Sendable (PostgresTransaction) -> Void = { _ in }
    ) async throws -> T {
        let logger = logger
        return try await leased { [self] connection in
            try await connection.query(begin, logger: logger)
            let transaction = self.transaction(on: connection)
            do {
                let result = try await body(transaction)
                try await connection.query("COMMIT", logger: logger)
                committed(transaction)
                return result
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    /// Runs `body` on a pooled connection, waiting at most ``Configuration/connectionWait`` for
    /// one: while the database cannot be reached, a request fails at once with
    /// ``PostgresStorageError/unavailable(_:)`` rather than waiting while the pool retries.
    ///
    /// The wait and the lease race under one lock: either the connection comes first and `body`
    /// runs to its end (a dropped connection fails it), or the wait ends first, the request is
    /// answered, and a connection granted later is handed back without running `body`. The
    /// lease left waiting is cancelled in the background: the request does not wait for it.
    private func leased<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let (client, wait) = (client, connectionWait)
        let race = LeaseRace<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.start(continuation)
                let work = Task {
                    do {
                        let value = try await client.withConnection { connection in
                            guard race.acquire() else { throw CancellationError() }
                            // The driver does not always fail a statement whose connection the
                            // database ends (a restart, a terminated session): watch it, and
                            // answer as unavailable when it closes under the work.
                            let watcher = Task {
                                while race.isRunning {
                                    if connection.isClosed {
                                        race.giveUp(PostgresStorageError.unavailable("the connection to the database closed"), running: true)
                                        return
                                    }
                                    try? await Task.sleep(for: .milliseconds(50))
                                }
                            }
                            defer { watcher.cancel() }
                            return try await body(connection)
                        }
                        race.finish(.success(value))
                    } catch {
                        race.finish(.failure(error))
                    }
                }
                race.onAbandon { work.cancel() }
                // Cancelled as soon as the lease comes: a transaction leaves no timer behind.
                race.setTimer(
                    Task {
                        guard (try? await Task.sleep(for: wait)) != nil else { return }
                        race.giveUp(PostgresStorageError.unavailable("no connection to the database within \(wait)"))
                    })
            }
        } onCancel: {
            race.giveUp(CancellationError())
        }
    }

    /// Whether an error says the database cannot be reached now (a connection that fails or
    /// drops, the server shutting down or starting), as opposed to a fault of the request.
    static func isUnavailable(_ error: any Error) -> Bool {
        if case PostgresStorageError.unavailable = error { return true }
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed: return true
        default: break
        }
        // Class 08, connection exception; 57P01–57P03, the server shutting down or starting.
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return state.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(state)
    }

    /// Counts the rows a committed transaction sent, and analyzes, in the background, the tables
    /// that need statistics (``PostgresTableStatistics``). A failure only means another look later.
    private func keepStatistics(afterSending rows: [String: Int]) {
        for table in statistics.recordSent(rows) {
            Task { [client, logger, statistics] in
                let analyzed = try? await client.withConnection { connection in
                    try await PostgresTableStatistics.refresh(table, on: connection, logger: logger)
                }
                statistics.finished(table, analyzed: analyzed ?? false)
            }
        }
    }

    /// Errors that say "run the transaction again": a deadlock (`40P01`) or serialization
    /// failure (`40001`) the database chose this transaction to lose, a key a concurrent
    /// transaction inserted first (`23505`), or a row another transaction put in another scope.
    static func isTransient(_ error: any Error) -> Bool {
        if case PostgresStorageError.rowInAnotherScope = error { return true }
        guard let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] else { return false }
        return ["40001", "40P01", "23505"].contains(state)
    }
}

extension PostgresStorage: SharedRateWindows {
    /// One statement outside any transaction, on the `rate_windows` table (unlogged: counts
    /// are worth nothing after a crash): a key's row holds its current window and count.
    public func increment(_ key: String, window: Int64) async throws -> Int64 {
        let rows = try await leased { connection in
            try await connection.query(
                """
                INSERT INTO rate_windows (key, window_start, count) VALUES (\(key), \(window), 1)
                ON CONFLICT (key) DO UPDATE SET
                    count = CASE WHEN rate_windows.window_start = excluded.window_start THEN rate_windows.count + 1 ELSE 1 END,
                    window_start = excluded.window_start
                RETURNING count
                """, logger: self.logger
            ).collect()
        }
        guard let row = rows.first else { throw PostgresStorageError.unexpectedAnswer("rate_windows") }
        return try row.decode(Int64.self)
    }
}

/// The race of a request's wait for a connection against the lease (``PostgresStorage``'s
/// `leased`): whichever comes first decides, once.
private final class LeaseRace<T: Sendable>: Sendable {
    private enum Phase {
        case waiting
        case running
        case done
    }

    private struct State {
        var phase = Phase.waiting
        var continuation: CheckedContinuation<T, any Error>?
        var abandon: (@Sendable () -> Void)?
        var timer: Task<Void, Never>?
        /// Why the race was given up before it started: a task cancelled before it asked for a
        /// connection gives up at once, before its continuation exists.
        var earlyError: (any Error)?
    }

    private let state = NIOLockedValueBox(State())

    func start(_ continuation: CheckedContinuation<T, any Error>) {
        let given = state.withLockedValue { state -> (any Error)? in
            guard state.phase == .done else {
                state.continuation = continuation
                return nil
            }
            return state.earlyError ?? CancellationError()
        }
        if let given { continuation.resume(throwing: given) }
    }

    func onAbandon(_ abandon: @escaping @Sendable () -> Void) {
        let abandoned = state.withLockedValue { state -> Bool in
            guard state.phase == .waiting || state.phase == .running else { return true }
            state.abandon = abandon
            return false
        }
        // Given up before the lease was set going: cancel it now.
        if abandoned { abandon() }
    }

    func setTimer(_ timer: Task<Void, Never>) {
        // Decided already (the lease came, or failed): the timer has nothing to wait for.
        let decided = state.withLockedValue { state -> Bool in
            guard state.phase == .waiting else { return true }
            state.timer = timer
            return false
        }
        if decided { timer.cancel() }
    }

    /// The lease came: whether the work may run (not if the wait already ended).
    func acquire() -> Bool {
        let (acquired, timer) = state.withLockedValue { state -> (Bool, Task<Void, Never>?) in
            guard state.phase == .waiting else { return (false, nil) }
            state.phase = .running
            defer { state.timer = nil }
            return (true, state.timer)
        }
        timer?.cancel()
        return acquired
    }

    /// Whether the work has its connection and has not ended.
    var isRunning: Bool { state.withLockedValue { $0.phase == .running } }

    /// The wait ended (or the request was cancelled) before the lease came, or, `running`, the
    /// connection closed under the work: answer with `error`, and cancel the work.
    func giveUp(_ error: any Error, running: Bool = false) {
        let (continuation, abandon) = state.withLockedValue { state -> (CheckedContinuation<T, any Error>?, (@Sendable () -> Void)?) in
            guard state.phase == (running ? .running : .waiting) else { return (nil, nil) }
            state.phase = .done
            if state.continuation == nil { state.earlyError = error }
            defer { state.continuation = nil }
            return (state.continuation, state.abandon)
        }
        continuation?.resume(throwing: error)
        abandon?()
    }

    /// The work ended (or the lease failed): answer with its result, unless answered already.
    func finish(_ result: Result<T, any Error>) {
        let continuation = state.withLockedValue { state -> CheckedContinuation<T, any Error>? in
            guard state.phase != .done else { return nil }
            state.phase = .done
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(with: result)
    }
}

extension PostgresStorage {
    /// Chunks in the database, which every server process on it sees.
    package var defaultBlobStore: any BlobStore { DatabaseBlobStore(storage: self) }
}
