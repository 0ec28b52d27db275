package import Foundation
import SyncProtocol
import SyncServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The built `sync-server` executable, run as an operator runs it.
package enum SyncServerCommand {
    /// Variables a developer's shell may hold that would change what a test's server does (its
    /// keys, its database, crash-test pauses): taken out of every run, so only what a test passes
    /// reaches the server.
    package static let configurationVariables = [
        TokenKey.environmentVariable, AuditKey.environmentVariable, PostgresStorage.environmentVariable, FaultPauses.environmentVariable,
    ]

    /// The built `sync-server`, or another product built on `SyncServerCommands` (`name`).
    package static func executable(_ name: String = "sync-server") throws -> URL {
        try BuiltProducts.executable(name)
    }

    /// Runs `sync-server ARGUMENTS` (or the product `name`) to the end (`token`, `seed`, `audit
    /// verify`, …); `environment` is all of the server's configuration it gets from variables.
    package static func run(
        _ arguments: [String], environment: [String: String] = [:], timeout: Double = 300, executable name: String = "sync-server"
    ) throws -> CommandResult {
        try ChildProcess.run(executable(name), arguments, environment: environment, removing: configurationVariables, timeout: timeout)
    }
}

/// A real `sync-server serve` (the built binary) on a loopback port.
///
/// `start()` serves on a free port (the server picks it and prints it) and returns once `/health`
/// answers; later starts reuse that port, so clients keep their address across restarts. `stop()`
/// is a graceful SIGTERM, `crash()` a SIGKILL. The process is killed when the value is released,
/// whatever happened.
package final class SyncServerProcess: @unchecked Sendable {
    package let data: URL
    /// Options added to every `serve` (`--postgres URL`, `--secret-file FILE`, limits).
    package let serveOptions: [String]
    /// The product run: `sync-server`, or another server built on `SyncServerCommands`.
    package let executableName: String
    package private(set) var port: Int?
    private var child: ChildProcess?

    /// A server of the data folder `data`, not started yet.
    package init(data: URL, serveOptions: [String] = [], executable: String = "sync-server") {
        self.data = data
        self.serveOptions = serveOptions
        executableName = executable
    }

    deinit {
        child?.signal(SIGKILL)
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        package init(_ description: String) { self.description = description }
    }

    /// `http://127.0.0.1:PORT`, once started.
    package var url: URL {
        get throws {
            guard let port else { throw Failure("the server was never started") }
            return URL(string: "\(isTLS ? "https" : "http")://127.0.0.1:\(port)")!
        }
    }

    /// Runs a `sync-server` command other than `serve` (`seed`, `token`, `audit verify`).
    package func command(_ arguments: [String], timeout: Double = 60) throws -> CommandResult {
        try SyncServerCommand.run(arguments, timeout: timeout, executable: executableName)
    }

    /// Starts serving and waits until `/health` answers; `environment` adds variables
    /// (`OUTPOST_FAULT_DELAY_MS`).
    package func start(environment: [String: String] = [:], timeout: Double = 60) throws {
        guard child == nil || child?.isRunning == false else { return }
        // No request limit per device: the tests send as fast as they can.
        let arguments = ["serve", "--data", data.path, "--port", String(port ?? 0), "--rate", "0"] + serveOptions
        let process = try ChildProcess(
            try SyncServerCommand.executable(executableName), arguments, environment: environment,
            removing: SyncServerCommand.configurationVariables
        )
        child = process
        let deadline = Date().addingTimeInterval(timeout)
        while port == nil {
            if let number = Self.listeningPort(in: process.stdout) {
                port = number
            } else if !process.isRunning || Date() > deadline {
                process.signal(SIGKILL)
                throw Failure("sync-server did not start:\n\(process.stdout)\(process.stderr)")
            } else {
                usleep(20_000)
            }
        }
        while !isTLS, !(try isHealthy()) {
            guard process.isRunning, Date() < deadline else {
                process.signal(SIGKILL)
                throw Failure("sync-server did not answer /health:\n\(process.stdout)\(process.stderr)")
            }
            usleep(20_000)
        }
    }

    /// What the running (or last) process printed: its log.
    package var output: String { (child?.stdout ?? "") + (child?.stderr ?? "") }

    /// Whether it serves HTTPS (`--tls-cert`): it is then taken as started once it listens, since
    /// this process's URLSession does not trust a test's CA.
    package var isTLS: Bool { serveOptions.contains("--tls-cert") }

    /// The port of `sync-server listening on http(s)://127.0.0.1:PORT (data: …)`.
    private static func listeningPort(in output: String) -> Int? {
        guard let range = output.range(of: "listening on http://") ?? output.range(of: "listening on https://") else { return nil }
        let address = output[range.upperBound...].prefix { $0 != " " && $0 != "\n" }
        return address.split(separator: ":").last.flatMap { Int($0) }
    }

    /// Whether `/health` answers 200 now.
    private func isHealthy() throws -> Bool {
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
    package func stop() throws {
        guard let child, child.isRunning else { return }
        child.signal(SIGTERM)
        try child.wait(timeout: 30)
    }

    /// SIGKILL at once: a crash.
    package func crash() throws {
        guard let child, child.isRunning else { return }
        child.signal(SIGKILL)
        try child.wait(timeout: 30)
    }

    /// Waits until the running server's standard error holds `text`; `false` when it exited first.
    package func waitForError(containing text: String, timeout: Double = 60) throws -> Bool {
        guard let child else { throw Failure("the server was never started") }
        return try child.waitForError(containing: text, timeout: timeout)
    }

    /// Whether the `serve` process is still alive.
    package var isRunning: Bool { child?.isRunning ?? false }

    /// The server's output so far (for failure messages).
    package var log: String { (child?.stdout ?? "") + (child?.stderr ?? "") }

    /// A line of the running process's `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
    package func memoryKiB(_ field: String) -> Int? {
        guard let pid = child?.pid, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") })
        else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }

    /// Resets the running process's peak resident size (`VmHWM`) to its current one; false where
    /// the kernel does not allow it.
    package func resetPeakMemory() -> Bool {
        guard let pid = child?.pid else { return false }
        return (try? "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)) != nil
    }
}

private final class HealthFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var value: Bool { lock.withLock { flag } }
    func set(_ value: Bool) { lock.withLock { flag = value } }
}
