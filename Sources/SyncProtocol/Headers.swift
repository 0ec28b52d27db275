import Foundation

/// HTTP header and parameter names of the protocol, in one place for client and server.
public enum ProtocolHeaders {
    /// The device's schema versions on a pull: `Unit=3,Lesson=2`.
    public static let schema = "X-Outpost-Schema"
    /// The device's client id on a pull, so the answer can say `last_seq`.
    public static let clientID = "X-Outpost-Client"
    /// The app and its version on every request (`fieldops-ios/1.4.2`), for the server's fleet
    /// census: at most ``AppVersionHeader/maximumLength`` printable ASCII characters.
    public static let appVersion = "X-Outpost-App"
    /// The device's telemetry since its last accepted request, opt-in (``TelemetryHeader``).
    public static let telemetry = "X-Outpost-Telemetry"
}

/// `X-Outpost-App` text: an app's name and version as the app chooses to write them.
public enum AppVersionHeader {
    /// The longest value the server records, in characters.
    public static let maximumLength = 64

    /// Whether `text` is a value the server records: 1 to ``maximumLength`` printable ASCII
    /// characters (a version is not row data, and a census must not hold arbitrary bytes).
    public static func isValid(_ text: some StringProtocol) -> Bool {
        let bytes = text.utf8
        return !bytes.isEmpty && bytes.count <= maximumLength && bytes.allSatisfy { (0x20...0x7E).contains($0) }
    }
}

/// `X-Outpost-Schema` text: `Name=version` pairs separated by commas.
public enum SchemaHeader {
    /// The header value for schema versions by contract name, sorted by name.
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

/// What a device counts about its own syncing and sends, opt-in, with its requests
/// (`X-Outpost-Telemetry: syncs_ok=3,conflicts=1,outbox_pending=0`): only these names and whole
/// numbers, never row data. Counters are what happened since the last request the server
/// accepted (the device adds them back when a request fails); gauges are the value now.
public enum DeviceTelemetry: String, CaseIterable, Sendable, Hashable {
    /// Sync rounds that ended well.
    case syncsOK = "syncs_ok"
    /// Sync rounds that ended in an error (network, server, refusal).
    case syncsFailed = "syncs_failed"
    /// Writes the server answered `conflicted` or `rejected`.
    case conflicts
    /// Writes the app made into the outbox.
    case writesQueued = "writes_queued"
    /// Writes the server accepted (applied or known already): with ``writesQueued``, the offline completion rate.
    case writesDelivered = "writes_delivered"
    /// Reads through the cache that found the row on the device.
    case cacheHits = "cache_hits"
    /// Reads through the cache that had to fetch the row.
    case cacheMisses = "cache_misses"
    /// Rows the device's retention or storage limits evicted.
    case cacheEvictions = "cache_evictions"
    /// Gauge: writes waiting in the outbox.
    case outboxPending = "outbox_pending"
    /// Gauge: conflicts recorded on the device and not resolved yet.
    case conflictsOpen = "conflicts_open"

    /// Whether the value is the state now rather than a count since the last request.
    public var isGauge: Bool { self == .outboxPending || self == .conflictsOpen }
}

/// `X-Outpost-Telemetry` text: `name=count` pairs separated by commas.
public enum TelemetryHeader {
    /// The largest value one header may carry per name: a device never does a million things between two requests.
    public static let maximumValue: Int64 = 1_000_000
    /// The longest header the server reads.
    public static let maximumLength = 512

    /// The header value for telemetry counts, each clamped to 0...``maximumValue``.
    public static func encode(_ values: [DeviceTelemetry: Int64]) -> String {
        DeviceTelemetry.allCases.compactMap { name in values[name].map { "\(name.rawValue)=\(min(max($0, 0), maximumValue))" } }
            .joined(separator: ",")
    }

    /// The values of the names this build knows; names it does not know are skipped (a newer
    /// device may count more). `nil` when the text is malformed: too long, a pair without `=`,
    /// a value that is not a whole number from 0 to ``maximumValue``, or a name given twice.
    public static func decode(_ text: String) -> [DeviceTelemetry: Int64]? {
        // Read as bytes: the server reads this header on every request of a device that sends it.
        var text = text
        return text.withUTF8 { bytes -> [DeviceTelemetry: Int64]? in
            guard bytes.count <= maximumLength else { return nil }
            var values: [DeviceTelemetry: Int64] = [:]
            var seen: Set<String> = []
            var index = 0
            while index < bytes.count {
                let start = index
                while index < bytes.count, bytes[index] != UInt8(ascii: ",") { index += 1 }
                let part = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                guard let equals = part.firstIndex(of: UInt8(ascii: "=")) else {
                    if part.allSatisfy({ $0 == UInt8(ascii: " ") }) { continue }
                    return nil
                }
                let name = trimmed(part[part.startIndex..<equals])
                let digits = trimmed(part[(equals + 1)..<part.endIndex])
                guard !name.isEmpty, !digits.isEmpty, digits.count <= 7, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
                let value = digits.reduce(Int64(0)) { $0 * 10 + Int64($1 - 0x30) }
                let key = String(decoding: name, as: UTF8.self)
                guard value <= maximumValue, seen.insert(key).inserted else { return nil }
                if let known = DeviceTelemetry(rawValue: key) { values[known] = value }
            }
            return values
        }
    }

    private static func trimmed(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Slice<UnsafeBufferPointer<UInt8>> {
        var slice = bytes
        while let first = slice.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { slice = slice.dropFirst() }
        while let last = slice.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { slice = slice.dropLast() }
        return slice
    }
}
