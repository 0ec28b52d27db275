import ArgumentParser
import Foundation
import SyncServer

/// Exit codes of every command (listed in `sync-server --help`).
enum Exit {
    /// `audit verify` found a broken chain.
    static let auditBroken = ExitCode(1)
    /// The command could not do its work (data folder, key, address).
    static let failure = ExitCode(2)
}

/// Writes one line to standard output, unbuffered so a supervisor sees it at once.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Writes `error: …` to standard error and returns the exit code of a failed command.
func fail(_ message: String) -> ExitCode {
    FileHandle.standardError.write(Data(("error: " + message + "\n").utf8))
    return Exit.failure
}

/// The data folder and storage flags shared by `serve`, `seed` and `audit verify`.
struct DataOptions: ParsableArguments {
    @Option(name: .customLong("data"), help: ArgumentHelp("The server's data folder (SQLite database, assets, token.key).", valueName: "DIR"))
    var path: String

    @Option(
        name: .customLong("postgres"),
        help: ArgumentHelp(
            "Store everything in this PostgreSQL database instead of the data folder's SQLite (postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=require]); default $\(PostgresStorage.environmentVariable). Assets and token.key stay in --data.",
            valueName: "URL"
        )
    )
    var postgresURL: String?

    @Option(
        name: .customLong("audit-key-file"),
        help: ArgumentHelp(
            "A file holding the key the audit log is sealed with (at least 32 bytes); default $\(AuditKey.environmentVariable), else the data folder's audit.key.",
            valueName: "FILE")
    )
    var auditKeyFile: String?

    /// The audit key: the file of the flag, else the environment, else `audit.key` in the data folder.
    func auditKey() throws -> AuditKey {
        do {
            return try AuditKey.resolve(file: auditKeyFile.map { URL(fileURLWithPath: $0) }, dataDirectory: directory.url)
        } catch {
            throw fail(error.description)
        }
    }

    /// The PostgreSQL URL of the flag, else of the environment; `nil` for the embedded SQLite.
    var postgres: String? {
        if let postgresURL { return postgresURL }
        let environment = ProcessInfo.processInfo.environment[PostgresStorage.environmentVariable] ?? ""
        return environment.isEmpty ? nil : environment
    }

    var directory: DataDirectory {
        DataDirectory(URL(fileURLWithPath: (path as NSString).expandingTildeInPath, isDirectory: true).standardizedFileURL)
    }

    func validate() throws {
        if path.isEmpty { throw ValidationError("--data needs a folder") }
        if let postgres {
            do {
                _ = try PostgresStorage.Configuration(url: postgres)
            } catch {
                throw ValidationError("--postgres: \(error.description)")
            }
        }
    }

    /// Where the storage is, for messages (never with a password).
    var storageDescription: String {
        guard let postgres, let configuration = try? PostgresStorage.Configuration(url: postgres) else {
            return "SQLite in \(directory.url.path)"
        }
        return "PostgreSQL \(configuration.host):\(configuration.port)/\(configuration.database)"
    }

    /// Opens (creating and migrating if needed) the PostgreSQL storage when a URL is given, else
    /// the SQLite storage of the data folder; fails with exit code 2.
    func openStorage() async throws -> any SyncStorage {
        let key = try auditKey()
        do {
            if let postgres {
                var configuration = try PostgresStorage.Configuration(url: postgres)
                configuration.auditKey = key
                return try await PostgresStorage(configuration: configuration, contracts: SyncServerCommands.program.contracts)
            }
            return try SQLiteStorage(directory: directory.database, contracts: SyncServerCommands.program.contracts, auditKey: key)
        } catch let error as AuditKeyError {
            throw fail(error.description)
        } catch {
            throw fail("cannot open the server database (\(storageDescription)): \(error)")
        }
    }

    /// Lets go of the storage's connections.
    func close(_ storage: any SyncStorage) async {
        if let postgres = storage as? PostgresStorage { await postgres.close() }
    }
}
