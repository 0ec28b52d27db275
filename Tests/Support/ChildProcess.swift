package import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a finished command printed and how it exited.
package struct CommandResult: CustomStringConvertible, Sendable {
    package var arguments: [String]
    package var status: Int32
    package var stdout: String
    package var stderr: String

    package var description: String {
        "`\(arguments.joined(separator: " "))` exited \(status)\n--- stdout\n\(stdout)--- stderr\n\(stderr)"
    }
}

/// A child process whose output goes to files (so a full pipe never blocks it), which can be
/// waited for with a deadline or killed at any moment.
package final class ChildProcess: @unchecked Sendable {
    package let arguments: [String]
    private let process = Process()
    private let outputURL: URL
    private let errorURL: URL

    /// Starts `executable` with `arguments` in `directory` (this process's own when nil);
    /// `environment` is added to this process's own, after the variables in `removing` are taken out.
    package init(
        _ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:], removing: [String] = []
    ) throws {
        self.arguments = [executable.lastPathComponent] + arguments
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("child-output-\(UUID().uuidString)")
        outputURL = scratch.appendingPathExtension("out")
        errorURL = scratch.appendingPathExtension("err")
        for file in [outputURL, errorURL] where !FileManager.default.createFile(atPath: file.path, contents: nil) {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
        }
        process.executableURL = executable
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        var merged = ProcessInfo.processInfo.environment
        for name in removing { merged[name] = nil }
        merged.merge(environment) { $1 }
        process.environment = merged
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Runs a command to the end: `ChildProcess(…).wait(timeout:)`.
    package static func run(
        _ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:], removing: [String] = [],
        timeout: Double = 60
    ) throws -> CommandResult {
        try ChildProcess(executable, arguments, in: directory, environment: environment, removing: removing).wait(timeout: timeout)
    }

    /// Runs a program found on `PATH` (`git`, `python3`) to the end.
    package static func run(tool: String, _ arguments: [String], in directory: URL? = nil, timeout: Double = 60) throws -> CommandResult {
        try run(URL(fileURLWithPath: "/usr/bin/env"), [tool] + arguments, in: directory, timeout: timeout)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: outputURL)
        try? FileManager.default.removeItem(at: errorURL)
    }

    package var isRunning: Bool { process.isRunning }
    package var pid: Int32 { process.processIdentifier }

    /// What it printed so far.
    package var stdout: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }
    package var stderr: String { (try? String(contentsOf: errorURL, encoding: .utf8)) ?? "" }

    /// Sends a signal (SIGTERM to stop, SIGKILL to crash it).
    package func signal(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// Polls `condition` until it holds (`true`), or the process exited without it holding
    /// (`false`); throws after `timeout` seconds.
    package func poll(timeout: Double = 60, until condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let running = process.isRunning
            if try condition() { return true }
            guard running else { return false }
            guard Date() < deadline else { throw TimedOut(arguments: arguments, seconds: timeout) }
            usleep(500)
        }
    }

    /// Waits until standard error holds `text` (a fault pause announcing itself).
    package func waitForError(containing text: String, timeout: Double = 60) throws -> Bool {
        try poll(timeout: timeout) { stderr.contains(text) }
    }

    package struct TimedOut: Error, CustomStringConvertible {
        package var arguments: [String]
        package var seconds: Double
        package var description: String { "`\(arguments.joined(separator: " "))` did not finish within \(seconds) s; killed" }
    }

    /// Waits until it exits; kills it and throws after `timeout` seconds.
    @discardableResult
    package func wait(timeout: Double = 60) throws -> CommandResult {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                signal(SIGKILL)
                process.waitUntilExit()
                throw TimedOut(arguments: arguments, seconds: timeout)
            }
            usleep(10_000)
        }
        process.waitUntilExit()
        return CommandResult(arguments: arguments, status: process.terminationStatus, stdout: stdout, stderr: stderr)
    }
}
