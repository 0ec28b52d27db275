import Crypto
public import Foundation

/// The bearer token of `/metrics`: a scraper's credential, separate from device and admin
/// tokens so that giving Prometheus access grants nothing else.
public enum MetricsToken {
    /// The environment variable holding the token, when no file is given.
    public static let environmentVariable = "OUTPOST_METRICS_TOKEN"
    /// Tokens shorter than this are refused: it guards the server's traffic figures.
    public static let minimumLength = 16

    /// The token from `file` (trailing newline dropped), else the environment variable; `nil` when neither is set.
    public static func load(file: URL?, environment: [String: String] = ProcessInfo.processInfo.environment) throws(MetricsTokenError) -> String? {
        var token: String?
        if let file {
            guard let data = try? Data(contentsOf: file), let text = String(data: data, encoding: .utf8) else {
                throw .unreadable(path: file.path)
            }
            token = text.trimmingCharacters(in: .newlines)
        } else if let text = environment[environmentVariable], !text.isEmpty {
            token = text
        }
        guard let token else { return nil }
        guard token.count >= minimumLength else { throw .tooShort(length: token.count) }
        return token
    }

    /// Whether `sent` is `expected`, in time that does not depend on where they differ.
    static func matches(_ sent: String, _ expected: String) -> Bool {
        // Comparing digests keeps the time independent of the lengths too.
        let a = SHA256.hash(data: Data(sent.utf8)), b = SHA256.hash(data: Data(expected.utf8))
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

/// Why the metrics token could not be read.
public enum MetricsTokenError: Error, Hashable, Sendable, CustomStringConvertible {
    case unreadable(path: String)
    case tooShort(length: Int)

    /// What is wrong with the token, without the token itself.
    public var description: String {
        switch self {
        case .unreadable(let path): return "cannot read the metrics token file \(path)"
        case .tooShort(let length):
            return "the metrics token has \(length) characters; it needs at least \(MetricsToken.minimumLength) (for example `openssl rand -hex 16`)"
        }
    }
}
