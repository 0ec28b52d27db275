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

/// The data folder flag shared by `serve`, `seed` and `audit verify`.
struct DataOptions: ParsableArguments {
    @Option(name: .customLong("data"), help: ArgumentHelp("The server's data folder (SQLite database, assets, token.key).", valueName: "DIR"))
    var path: String

    var directory: DataDirectory {
        DataDirectory(URL(fileURLWithPath: (path as NSString).expandingTildeInPath, isDirectory: true).standardizedFileURL)
    }

    func validate() throws {
        if path.isEmpty { throw ValidationError("--data needs a folder") }
    }

    /// Opens (creating if needed) the SQLite storage, or fails with exit code 2.
    func openStorage() throws -> SQLiteStorage {
        do {
            return try SQLiteStorage(directory: directory.database)
        } catch {
            throw fail("cannot open the server database in \(directory.url.path): \(error)")
        }
    }
}
