import Foundation
import SyncClient

/// The device's token: the one `login` stored, and, when the server refuses it, a fresh one from
/// the login's `--token-command` (stored for the next runs). Without a command the stored token
/// is all there is, and a refusal reaches the user (log in again).
final class ProfileTokens: TokenProvider, @unchecked Sendable {
    private let home: DeviceHome
    private let lock = NSLock()
    private var profile: DeviceProfile

    init(home: DeviceHome, profile: DeviceProfile) {
        self.home = home
        self.profile = profile
    }

    /// Why the token command gave no token.
    struct CommandFailed: Error, CustomStringConvertible {
        var description: String
    }

    func token(refresh: Bool) async throws -> String {
        let current = lock.withLock { profile }
        guard refresh, let command = current.tokenCommand else { return current.token }
        let fresh = try Self.run(command)
        var updated = current
        updated.token = fresh
        lock.withLock { profile = updated }
        try? home.save(updated)
        return fresh
    }

    /// The trimmed standard output of `/bin/sh -c command`, which must exit 0 and print something.
    static func run(_ command: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0, !token.isEmpty else {
            throw CommandFailed(description: "the token command exited \(process.terminationStatus) without a token")
        }
        return token
    }
}
