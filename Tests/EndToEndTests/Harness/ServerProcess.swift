import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real `sync-server` on an embedded SQLite in a temporary folder, on a loopback port.
///
/// `start()` serves on a free port (the server picks it and prints it), later starts reuse that
/// port so devices keep their address across restarts; `stop()` is a graceful SIGTERM, `crash()`
/// a SIGKILL. The process is killed when the value is released, whatever happened.
final class ServerProcess: @unchecked Sendable {
    let binary: URL
    let data: URL
    private(set) var port: Int?
    private var child: ChildProcess?

    init(data: URL) throws {
        binary = try Binaries.url(of: "sync-server")
        self.data = data
    }

    deinit {
        child?.signal(SIGKILL)
    }

    var url: URL {
        get throws {
            guard let port else { throw Failure(description: "the server was never started") }
            return URL(string: "http://127.0.0.1:\(port)")!
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs a `sync-server` command other than `serve` (seed, token, audit verify).
    func command(_ arguments: [String], timeout: Double = 60) throws -> CommandResult {
        try ChildProcess(binary, arguments, removing: ["OUTPOST_TOKEN_SECRET"]).wait(timeout: timeout)
    }

    /// Loads the sample content.
    func seed(team: String = "team-1") throws {
        let result = try command(["seed", "--data", data.path, "--tenant", "demo", "--team", team])
        guard result.status == 0 else { throw Failure(description: "seeding failed: \(result)") }
    }

    /// A device token signed with the server's key.
    func token(user: String, device: String, teams: [String] = []) throws -> String {
        let result = try command(
            ["token", "--data", data.path, "--tenant", "demo", "--user", user, "--device", device] + teams.flatMap { ["--team", $0] }
        )
        guard result.status == 0 else { throw Failure(description: "no token: \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts serving and waits until `/health` answers; `environment` adds variables
    /// (`OUTPOST_FAULT_DELAY_MS`).
    func start(environment: [String: String] = [:], timeout: Double = 30) throws {
        guard child == nil || child?.isRunning == false else { return }
        let process = try ChildProcess(
            binary, ["serve", "--data", data.path, "--port", String(port ?? 0), "--rate", "0"], environment: environment,
            removing: ["OUTPOST_TOKEN_SECRET", "OUTPOST_FAULT_DELAY_MS"]
        )
        child = process
        let deadline = Date().addingTimeInterval(timeout)
        while port == nil {
            if let number = Self.listeningPort(in: process.stdout) {
                port = number
            } else if !process.isRunning || Date() > deadline {
                process.signal(SIGKILL)
                throw Failure(description: "sync-server did not start:\n\(process.stdout)\(process.stderr)")
            } else {
                usleep(20_000)
            }
        }
        while !(try isHealthy()) {
            guard process.isRunning, Date() < deadline else {
                process.signal(SIGKILL)
                throw Failure(description: "sync-server did not answer /health:\n\(process.stdout)\(process.stderr)")
            }
            usleep(20_000)
        }
    }

    /// The port of `sync-server listening on http://127.0.0.1:PORT (data: …)`.
    static func listeningPort(in output: String) -> Int? {
        guard let range = output.range(of: "listening on http://") else { return nil }
        let address = output[range.upperBound...].prefix { $0 != " " && $0 != "\n" }
        return address.split(separator: ":").last.flatMap { Int($0) }
    }

    /// Whether `/health` answers 200 now.
    func isHealthy() throws -> Bool {
        let semaphore = DispatchSemaphore(value: 0)
        let healthy = HealthFlag()
        var request = URLRequest(url: try url.appendingPathComponent("health"), timeoutInterval: 2)
        request.httpMethod = "GET"
        URLSession.shared.dataTask(with: request) { _, response, _ in
            healthy.set((response as? HTTPURLResponse)?.statusCode == 200)
            semaphore.signal()
        }.resume()
        semaphore.wait()
        return healthy.value
    }

    /// SIGTERM, and waits for the exit.
    func stop() throws {
        guard let child, child.isRunning else { return }
        child.signal(SIGTERM)
        try child.wait(timeout: 30)
    }

    /// SIGKILL at once: a crash.
    func crash() throws {
        guard let child, child.isRunning else { return }
        child.signal(SIGKILL)
        try child.wait(timeout: 30)
    }

    /// Waits until the running server's standard error holds `text`; `false` when it exited first.
    func waitForError(containing text: String, timeout: Double = 60) throws -> Bool {
        guard let child else { throw Failure(description: "the server was never started") }
        return try child.waitForError(containing: text, timeout: timeout)
    }

    /// The server's output so far (for failure messages).
    var log: String { (child?.stdout ?? "") + (child?.stderr ?? "") }
}

private final class HealthFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var value: Bool { lock.withLock { flag } }
    func set(_ value: Bool) { lock.withLock { flag = value } }
}
