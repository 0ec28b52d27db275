public import Foundation

/// How many devices run each version of each contract: what `sync-server fleet --export` writes
/// and `GET /admin/v1/fleet` answers (format `outpost.fleet-census`, version 1), and what the
/// rollout gate of `contractc check --fleet` counts with.
///
/// Only the active devices (seen within the census's active window) count; stale devices,
/// app versions and members this version of the format does not know are read past.
public struct FleetCensus: Hashable, Sendable {
    /// The `format` member every census carries.
    public static let format = "outpost.fleet-census"
    /// The `format_version` this compiler reads.
    public static let formatVersion = 1

    /// When the server counted (`generated_at`, as written), if it said.
    public var generatedAt: String?
    /// The tenant counted; nil when the census covers every tenant.
    public var tenant: String?
    /// How recently a device must have synced to count as active, if the census said.
    public var activeWindowSeconds: Int?
    /// Every active device, whatever contracts it reported.
    public var activeDevices: Int
    /// Active devices per contract name, then per version of that contract they run. A device
    /// that never reported a contract is in no entry of it.
    public var activeDevicesByVersion: [String: [Int: Int]]

    /// A census as counted, without reading a document (for tools and tests that count themselves).
    public init(
        activeDevices: Int, activeDevicesByVersion: [String: [Int: Int]], tenant: String? = nil, generatedAt: String? = nil,
        activeWindowSeconds: Int? = nil
    ) {
        self.activeDevices = activeDevices
        self.activeDevicesByVersion = activeDevicesByVersion
        self.tenant = tenant
        self.generatedAt = generatedAt
        self.activeWindowSeconds = activeWindowSeconds
    }

    /// Why a document is not a census this compiler can count with.
    public struct ReadError: Error, Hashable, Sendable, CustomStringConvertible {
        /// What is wrong with the document.
        public var message: String

        init(_ message: String) { self.message = message }

        /// The message, as `contractc check` prints it.
        public var description: String { message }
    }

    /// Reads a census document. Throws when it is not JSON, names another format or a
    /// `format_version` other than ``formatVersion``, lacks `format`, `format_version`,
    /// `devices.active` or `contracts`, or holds a count that is not a whole number from 0.
    public init(json data: Data) throws(ReadError) {
        let decoder = JSONDecoder()
        // The format first, so that another document is named as such rather than by the
        // first member it lacks.
        let header: Header
        do { header = try decoder.decode(Header.self, from: data) } catch { throw Self.readError(error) }
        guard let format = header.format else { throw ReadError("missing `format` (\"\(Self.format)\")") }
        guard format == Self.format else { throw ReadError("`format` is \"\(format)\", not \"\(Self.format)\"") }
        guard let version = header.formatVersion?.value else { throw ReadError("missing `format_version`") }
        guard version == Self.formatVersion else {
            throw ReadError("unsupported `format_version` \(version): this contractc reads version \(Self.formatVersion)")
        }
        let body: Body
        do { body = try decoder.decode(Body.self, from: data) } catch { throw Self.readError(error) }

        let activeDevices = body.devices.active.value
        guard activeDevices >= 0 else { throw ReadError("`devices.active` is negative") }
        var byVersion: [String: [Int: Int]] = [:]
        for (contract, versions) in body.contracts.sorted(by: { $0.key < $1.key }) {
            var counts: [Int: Int] = [:]
            for (key, entry) in versions.sorted(by: { $0.key < $1.key }) {
                // Versions are decimal object keys: "2", never "v2" or "+2".
                guard !key.isEmpty, key.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let number = Int(key)
                else {
                    throw ReadError("`contracts.\(contract)` has the version key \"\(key)\", which is not a whole number")
                }
                guard entry.active.value >= 0 else { throw ReadError("`contracts.\(contract).\(key).active` is negative") }
                counts[number, default: 0] += entry.active.value
            }
            // A device runs one version of a contract: more than every active device means the
            // census is not what the server counted.
            let total = counts.values.reduce(0, +)
            guard total <= activeDevices else {
                throw ReadError("`contracts.\(contract)` counts \(total) active devices, more than `devices.active` (\(activeDevices))")
            }
            byVersion[contract] = counts
        }
        self.init(
            activeDevices: activeDevices, activeDevicesByVersion: byVersion, tenant: body.tenant, generatedAt: body.generatedAt,
            activeWindowSeconds: body.activeWindowSeconds?.value
        )
    }

    // MARK: The document

    /// A whole number. Read through `Double` when it is not an `Int`, so that `1.5` is named by
    /// its path: JSONDecoder reports a number that does not fit as invalid JSON, with no path.
    private struct WholeNumber: Decodable {
        var value: Int

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Int.self) {
                self.value = value
                return
            }
            _ = try container.decode(Double.self)  // a string, null or an object: that error, with its path
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a whole number")
        }
    }

    private struct Header: Decodable {
        var format: String?
        var formatVersion: WholeNumber?

        enum CodingKeys: String, CodingKey {
            case format
            case formatVersion = "format_version"
        }
    }

    private struct Body: Decodable {
        struct Counts: Decodable {
            var active: WholeNumber
        }

        var generatedAt: String?
        var tenant: String?
        var activeWindowSeconds: WholeNumber?
        var devices: Counts
        var contracts: [String: [String: Counts]]

        enum CodingKeys: String, CodingKey {
            case generatedAt = "generated_at"
            case tenant
            case activeWindowSeconds = "active_window_seconds"
            case devices, contracts
        }
    }

    /// A decoding error in the census's own words: the dotted path of the member and what is wrong with it.
    private static func readError(_ error: any Error) -> ReadError {
        func path(_ codingPath: [any CodingKey], _ last: (any CodingKey)? = nil) -> String {
            "`" + (codingPath + (last.map { [$0] } ?? [])).map(\.stringValue).joined(separator: ".") + "`"
        }
        func kind(_ type: Any.Type) -> String {
            switch type {
            case is Int.Type, is Double.Type: return "a whole number"
            case is String.Type: return "a string"
            default: return "an object"
            }
        }
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?:
            return ReadError("missing \(path(context.codingPath, key))")
        case .valueNotFound(let type, let context)?:
            return ReadError("\(path(context.codingPath)) is null, not \(kind(type))")
        case .typeMismatch(let type, let context)?:
            if context.codingPath.isEmpty { return ReadError("the document is not a JSON object") }
            return ReadError("\(path(context.codingPath)) is not \(kind(type))")
        case .dataCorrupted(let context)?:
            if context.codingPath.isEmpty { return ReadError("not valid JSON") }
            return ReadError("\(path(context.codingPath)) is \(context.debugDescription)")
        default:
            return ReadError("\(error)")
        }
    }
}
