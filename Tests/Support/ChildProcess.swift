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
///
/// Started with `posix_spawn` rather than Foundation's `Process`: on Linux, `Process.run()`
/// lists `/proc/self/fd` with a read past the end of each directory entry (swift-corelibs-
/// foundation #5472, fixed after this toolchain), which crashed a test run that had many
/// descriptors open; it also changes the whole process's working directory while it starts a
/// child in another. Here the child opens its own standard streams, moves to its directory and
/// closes every other inherited descriptor (glibc's `_np` file actions), and the parent reaps it
/// with `waitpid` on its pid alone.
package final class ChildProcess: @unchecked Sendable {
    package let arguments: [String]
    private let processID: pid_t
    private let outputURL: URL
    private let errorURL: URL
    /// The child's `waitpid` status once it has been reaped.
    private let reaped = NSLock()
    private var exitStatus: Int32?

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
        var merged = ProcessInfo.processInfo.environment
        for name in removing { merged[name] = nil }
        merged.merge(environment) { $1 }
        processID = try Self.spawn(
            executable.path, [executable.path] + arguments, environment: merged.map { "\($0.key)=\($0.value)" }, directory: directory?.path,
            output: outputURL.path, error: errorURL.path)
    }

    private static func spawn(
        _ path: String, _ argv: [String], environment: [String], directory: String?, output: String, error: String
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        try check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
        defer { posix_spawn_file_actions_destroy(&actions) }
        try check(posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0), "open /dev/null")
        try check(posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_TRUNC, 0), "open \(output)")
        try check(posix_spawn_file_actions_addopen(&actions, 2, error, O_WRONLY | O_TRUNC, 0), "open \(error)")
        if let directory {
            guard let addChdir = FileActions.addChdir else { throw SpawnError(message: "posix_spawn_file_actions_addchdir_np is missing") }
            try check(addChdir(&actions, directory), "chdir \(directory)")
        }
        // Descriptors opened without close-on-exec (a test's sockets, files) stay out of the child.
        if let addCloseFrom = FileActions.addCloseFrom { try check(addCloseFrom(&actions, 3), "closefrom") }
        var attributes = posix_spawnattr_t()
        try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own process group, as `Process` gave it (a ^C to the test run is not sent to it
        // twice), every signal unblocked and at its default action: what this thread blocks or
        // the process ignores (SwiftNIO ignores SIGPIPE) would otherwise carry over the exec.
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        try check(posix_spawnattr_setsigmask(&attributes, &none), "posix_spawnattr_setsigmask")
        try check(posix_spawnattr_setsigdefault(&attributes, &all), "posix_spawnattr_setsigdefault")
        let flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        try check(posix_spawnattr_setflags(&attributes, Int16(flags)), "posix_spawnattr_setflags")
        let cArguments = argv.map { strdup($0) } + [nil]
        let cEnvironment = environment.map { strdup($0) } + [nil]
        defer { for pointer in cArguments + cEnvironment { free(pointer) } }
        var pid: pid_t = 0
        try check(posix_spawn(&pid, path, &actions, &attributes, cArguments, cEnvironment), "posix_spawn \(path)")
        return pid
    }

    /// glibc's file actions that Swift's Glibc module does not import, found at run time.
    private enum FileActions {
        typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        static let addChdir = dlsym(nil, "posix_spawn_file_actions_addchdir_np").map { unsafeBitCast($0, to: AddChdir.self) }
        static let addCloseFrom = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map { unsafeBitCast($0, to: AddCloseFrom.self) }
    }

    package struct SpawnError: Error, CustomStringConvertible {
        package var message: String
        package var description: String { "cannot start the child process: \(message)" }
    }

    private static func check(_ result: Int32, _ step: String) throws {
        guard result != 0 else { return }
        throw SpawnError(message: "\(step): \(String(cString: strerror(result)))")
    }

    /// The child's `waitpid` status, reaping it if it has exited; `nil` while it runs.
    private func status(blocking: Bool) -> Int32? {
        reaped.lock()
        defer { reaped.unlock() }
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        while true {
            let result = waitpid(processID, &status, blocking ? 0 : WNOHANG)
            if result == processID {
                exitStatus = status
                return status
            }
            if result == -1, errno == EINTR { continue }
            return nil
        }
    }

    /// The exit code, or the signal that ended it (as `Process.terminationStatus` has it).
    private static func terminationStatus(_ status: Int32) -> Int32 {
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : signal
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
        if isRunning {
            kill(processID, SIGKILL)
            _ = status(blocking: true)
        }
        try? FileManager.default.removeItem(at: outputURL)
        try? FileManager.default.removeItem(at: errorURL)
    }

    package var isRunning: Bool { status(blocking: false) == nil }
    package var pid: Int32 { processID }

    /// What it printed so far.
    package var stdout: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }
    package var stderr: String { (try? String(contentsOf: errorURL, encoding: .utf8)) ?? "" }

    /// Sends a signal (SIGTERM to stop, SIGKILL to crash it).
    package func signal(_ signal: Int32) {
        if isRunning { kill(processID, signal) }
    }

    /// Polls `condition` until it holds (`true`), or the process exited without it holding
    /// (`false`); throws after `timeout` seconds.
    package func poll(timeout: Double = 60, until condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let running = isRunning
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
        while isRunning {
            if Date() > deadline {
                signal(SIGKILL)
                _ = status(blocking: true)
                throw TimedOut(arguments: arguments, seconds: timeout)
            }
            usleep(10_000)
        }
        let status = status(blocking: true) ?? 0
        return CommandResult(arguments: arguments, status: Self.terminationStatus(status), stdout: stdout, stderr: stderr)
    }
}
