import Foundation

/// A child process of the benchmark (a `sync-server`, a device), its standard output and error
/// in files (never a pipe that could fill up and stall it).
final class ChildProcess: @unchecked Sendable {
    let label: String
    let stdoutURL: URL
    let stderrURL: URL
    private let process = Process()
    private let exited = DispatchSemaphore(value: 0)
    private let handles: [FileHandle]
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private var ended: ContinuousClock.Instant?
    private let lock = NSLock()
    /// The child's standard input when started with `input: true` (``send(_:)``), else none.
    private let input: Pipe?

    /// Starts `executable` with `arguments`; its output goes to `logs/name.stdout` and `.stderr`.
    /// With `input`, its standard input is a pipe that ``send(_:)`` writes lines to.
    init(_ executable: URL, _ arguments: [String], logs: URL, name: String, environment: [String: String] = [:], input: Bool = false) throws {
        label = "\(executable.lastPathComponent) \(arguments.first ?? "")"
        stdoutURL = logs.appendingPathComponent("\(name).stdout")
        stderrURL = logs.appendingPathComponent("\(name).stderr")
        guard FileManager.default.createFile(atPath: stdoutURL.path, contents: nil),
            FileManager.default.createFile(atPath: stderrURL.path, contents: nil),
            let stdout = FileHandle(forWritingAtPath: stdoutURL.path), let stderr = FileHandle(forWritingAtPath: stderrURL.path)
        else { throw BenchmarkError("cannot create the log files of \(name) in \(logs.path)") }
        handles = [stdout, stderr]
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        self.input = input ? Pipe() : nil
        process.standardInput = self.input ?? FileHandle.nullDevice
        process.standardOutput = stdout
        process.standardError = stderr
        started = clock.now
        // Not `waitUntilExit()`: on Linux it polls the run loop every 50 ms. The handler runs
        // as soon as the child exits.
        process.terminationHandler = { [exited, lock, clock] _ in
            lock.withLock { self.ended = clock.now }
            exited.signal()
        }
        do {
            try process.run()
        } catch {
            throw BenchmarkError("cannot start \(executable.path): \(error)")
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// Writes `line` and a newline to the child's standard input (started with `input: true`).
    func send(_ line: String) throws {
        guard let input else { throw BenchmarkError("\(label) was started without an input pipe") }
        try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Closes the child's standard input (started with `input: true`): it reads its end.
    func closeInput() {
        try? input?.fileHandleForWriting.close()
    }

    var isRunning: Bool { process.isRunning }

    /// Waits for the child to exit; returns its wall time from launch to exit. A non-zero exit
    /// or a signal is an error quoting its standard error.
    @discardableResult
    func waitForSuccess() throws -> Double {
        exited.wait()
        exited.signal()
        for handle in handles { try? handle.close() }
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw BenchmarkError(
                "\(label) failed (\(process.terminationReason == .exit ? "status" : "signal") \(process.terminationStatus)):\n"
                    + errors.split(separator: "\n").prefix(25).joined(separator: "\n")
            )
        }
        return lock.withLock { Timing.seconds((ended ?? clock.now) - started) }
    }

    /// Asks the child to stop (SIGTERM), then kills it if it has not exited after `grace` seconds.
    func stop(grace: Double = 10) {
        guard process.isRunning else { return }
        process.terminate()
        if exited.wait(timeout: .now() + grace) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            exited.wait()
        }
        exited.signal()
        for handle in handles { try? handle.close() }
    }

    var output: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }
    var errors: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// Waits until standard output has a line containing `marker` and returns it; fails when
    /// the child exits first or `timeout` passes.
    func waitForLine(containing marker: String, timeout: Double) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = output.split(separator: "\n").first(where: { $0.contains(marker) }) { return String(line) }
            guard process.isRunning else {
                throw BenchmarkError("\(label) exited before printing '\(marker)':\n\(errors.suffix(2_000))")
            }
            usleep(10_000)
        }
        throw BenchmarkError("\(label) did not print '\(marker)' within \(Int(timeout)) s")
    }
}
