import Foundation
import OutpostTestSupport

/// One `sync-device`: a home folder, and the binary run against it as a user would.
struct Device {
    let name: String
    let home: URL
    let binary: URL

    init(_ name: String, in folder: URL) throws {
        self.name = name
        home = folder.appendingPathComponent(name, isDirectory: true)
        binary = try BuiltProducts.executable("sync-device")
    }

    /// Runs `sync-device ARGUMENTS --home HOME` to the end; `now` shifts the device's clock
    /// (`+15d`).
    @discardableResult
    func run(_ arguments: [String], now: String? = nil, timeout: Double = 60) throws -> CommandResult {
        try start(arguments, now: now).wait(timeout: timeout)
    }

    /// Runs a command that must succeed (exit 0) and returns its result.
    @discardableResult
    func ok(_ arguments: [String], now: String? = nil) throws -> CommandResult {
        let result = try run(arguments, now: now)
        guard result.status == 0 else { throw Unexpected(description: "\(name): \(result)") }
        return result
    }

    /// Runs a read command with `--json` and parses its output (any exit code).
    func json(_ arguments: [String], now: String? = nil) throws -> JSON {
        try run(arguments + ["--json"], now: now).json()
    }

    /// Starts a command without waiting, to kill it at a chosen moment; `environment` adds
    /// variables (`OUTPOST_FAULT_DELAY_MS`).
    func start(_ arguments: [String], now: String? = nil, environment: [String: String] = [:]) throws -> ChildProcess {
        var environment = environment
        if let now { environment["OUTPOST_DEVICE_NOW"] = now }
        return try ChildProcess(
            binary, arguments + ["--home", home.path], environment: environment,
            removing: ["OUTPOST_DEVICE_NOW", "OUTPOST_HOME", "OUTPOST_FAULT_DELAY_MS"]
        )
    }

    /// The login `device.json` holds: token, tenant, user, device, scopes.
    func profile() throws -> JSON {
        let text = try String(contentsOf: home.appendingPathComponent("device.json"), encoding: .utf8)
        return try JSON(parsing: text, context: "\(name)'s device.json")
    }

    struct Unexpected: Error, CustomStringConvertible {
        var description: String
    }
}
