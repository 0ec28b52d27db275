import Foundation

/// HTTP header and parameter names of the protocol, in one place for client and server.
public enum ProtocolHeaders {
    /// The device's schema versions on a pull: `Unit=3,Lesson=2`.
    public static let schema = "X-Outpost-Schema"
    /// The device's client id on a pull, so the answer can say `last_seq`.
    public static let clientID = "X-Outpost-Client"
}

/// `X-Outpost-Schema` text: `Name=version` pairs separated by commas.
public enum SchemaHeader {
    public static func encode(_ versions: [String: Int]) -> String {
        versions.keys.sorted().map { "\($0)=\(versions[$0]!)" }.joined(separator: ",")
    }

    /// `nil` when the text is malformed: an empty name, a version that is not a positive
    /// number, or a contract named twice.
    public static func decode(_ text: String) -> [String: Int]? {
        var versions: [String: Int] = [:]
        // Split at the scalars `,` and `=`, not at characters: a comma followed by a combining
        // mark is one character, so a name starting with one was not split from the pair before
        // it, and versions read from one header did not read back from their own encoding.
        for part in text.unicodeScalars.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2 else { return nil }
            let name = Substring(pair[0]).trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, versions[name] == nil,
                let version = Int(Substring(pair[1]).trimmingCharacters(in: .whitespaces)), version > 0
            else { return nil }
            versions[name] = version
        }
        return versions
    }
}
