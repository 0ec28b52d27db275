import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The databases the example's server runs on in these tests: the embedded SQLite of its data
/// folder, and PostgreSQL (from `OUTPOST_TEST_POSTGRES_URL`, which `make test` sets; without it
/// the PostgreSQL cases fail and say so, never skip).
enum ServerDatabase: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// The variables the server's commands are run with: for PostgreSQL, the test database's URL
    /// with a schema no other test uses.
    func environment() throws -> [String: String] {
        guard self == .postgres else { return [:] }
        guard let url = ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"], !url.isEmpty else {
            throw ServerFailure(
                "no PostgreSQL for the tests: set OUTPOST_TEST_POSTGRES_URL (make test starts a throwaway one with scripts/with-postgres.sh)")
        }
        let schema = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        return ["OUTPOST_POSTGRES_URL": url + (url.contains("?") ? "&" : "?") + "schema=" + schema]
    }
}

struct ServerFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What a command printed, and how it ended.
struct CommandResult: Sendable, CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String

    var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
}

/// The example's own server, `inspections-server` (this package's executable), run as its
/// operator runs it: `serve` on a free loopback port in a data folder of its own, and its other
/// subcommands on the same data. The members of the crew are recorded by `token --team`.
final class InspectionServerProcess: @unchecked Sendable {
    static let tenant = "acme"
    static let crew = "crew-1"

    let database: ServerDatabase
    let data: URL
    private let environment: [String: String]
    private var process: Process?
    private(set) var port: Int?

    init(_ database: ServerDatabase) throws {
        self.database = database
        environment = try database.environment()
        data = FileManager.default.temporaryDirectory.appendingPathComponent("inspections-server-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
    }

    deinit {
        try? stop()
        try? FileManager.default.removeItem(at: data)
    }

    /// The built `inspections-server`: beside the test bundle, where `swift build` puts the
    /// package's executables.
    static func executable() throws -> URL {
        let folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [folder, folder.deletingLastPathComponent(), folder.deletingLastPathComponent().deletingLastPathComponent()]
            .map { $0.appendingPathComponent("inspections-server") }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw ServerFailure("inspections-server is not built beside \(folder.path): run `swift build --build-tests` first")
        }
        return found
    }

    /// The server's address once it listens.
    var url: URL {
        get throws {
            guard let port else { throw ServerFailure("the server was never started") }
            return URL(string: "http://127.0.0.1:\(port)")!
        }
    }

    /// Runs a subcommand to its end.
    func command(_ arguments: [String], timeout: TimeInterval = 120) throws -> CommandResult {
        // Its output goes to files, which never fill up and stall it as a pipe would.
        let (out, err) = (
            data.appendingPathComponent("command-\(UUID().uuidString).out"), data.appendingPathComponent("command-\(UUID().uuidString).err")
        )
        defer { for file in [out, err] { try? FileManager.default.removeItem(at: file) } }
        let process = try launch(arguments, stdout: out, stderr: err)
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                throw ServerFailure("\(arguments.first ?? "") did not end within \(timeout) s")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return CommandResult(
            status: process.terminationStatus, stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }

    /// Starts the executable with `arguments` and the database's variables, its output to files.
    private func launch(_ arguments: [String], stdout: URL, stderr: URL) throws -> Process {
        for file in [stdout, stderr] { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
        let process = Process()
        process.executableURL = try Self.executable()
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let output = try FileHandle(forWritingTo: stdout)
        process.standardOutput = output
        process.standardError = stdout == stderr ? output : try FileHandle(forWritingTo: stderr)
        try process.run()
        return process
    }

    /// A device's token of `user`, member of the crew (recorded in the server's database), or an
    /// admin token (the office) when `admin`.
    func token(user: String, device: String, admin: Bool = false, teams: [String] = [crew]) throws -> String {
        let result = try command(
            ["token", "--data", data.path, "--tenant", Self.tenant, "--user", user, "--device", device]
                + teams.flatMap { ["--team", $0] } + (admin ? ["--admin"] : []))
        guard result.status == 0 else { throw ServerFailure("token: \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts `serve` (on the port of an earlier start, else a free one) and waits until it listens.
    func start(timeout: TimeInterval = 60) throws {
        let log = data.appendingPathComponent("serve-\(UUID().uuidString).log")
        let process = try launch(["serve", "--data", data.path, "--port", String(port ?? 0), "--rate", "0"], stdout: log, stderr: log)
        self.process = process
        let deadline = Date().addingTimeInterval(timeout)
        while port == nil {
            let printed = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let line = printed.split(separator: "\n").first(where: { $0.contains(" listening on http://127.0.0.1:") }),
                let number = line.split(separator: ":").dropFirst(2).first.flatMap({ Int($0.prefix { $0.isNumber }) })
            {
                port = number
            } else if !process.isRunning || Date() > deadline {
                throw ServerFailure("serve did not start:\n\(printed)")
            } else {
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
    }

    /// Stops the server (SIGTERM) and waits for it to exit.
    func stop() throws {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
        self.process = nil
    }

    /// A request devices do not make (the office's, a raw pull, a stranger's), with `token`;
    /// answers the status and the body.
    func send(_ method: String, _ path: String, token: String, body: String? = nil) async throws -> (status: Int, body: String) {
        var request = URLRequest(url: URL(string: path, relativeTo: try url)!)
        request.httpMethod = method
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }
}
