import Foundation

/// The value of a `file` field: which file a row names, never its bytes.
///
/// A file is named by its content: the SHA-256 of its bytes, with its size and content type
/// (and, optionally, the name it had where it came from). A row travels with the reference
/// alone; the bytes go through the file routes (`/sync/v1/files`), uploaded before the row
/// that names them is pushed and downloaded when a device asks for them. Two rows naming the
/// same bytes name the same file.
///
/// On the wire and in a stored column it is a JSON object:
/// `{"sha256": "<64 lowercase hex digits>", "size": 1234, "content_type": "image/jpeg", "name": "slip.jpg"}`
/// (`name` absent when there is none).
public struct FileReference: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The SHA-256 of the file's bytes, 64 lowercase hexadecimal digits.
    public let sha256: String
    /// The file's size in bytes.
    public let byteCount: Int64
    /// The file's media type, lowercased (`image/jpeg`); parameters such as `charset` are not kept.
    public let contentType: String
    /// The name the file had where it came from (`slip.jpg`): a display name, never a path.
    public let name: String?

    /// The largest size a reference may state: 2^53 bytes, the most a JSON number carries exactly.
    public static let maximumByteCount: Int64 = 1 << 53
    /// The longest content type and name, in UTF-8 bytes.
    public static let maximumContentTypeBytes = 255
    /// The longest file name, in UTF-8 bytes.
    public static let maximumNameBytes = 255

    /// A reference to `byteCount` bytes whose SHA-256 is `sha256`.
    ///
    /// - Throws: ``FileReferenceError`` when the hash is not 64 hexadecimal digits, the size is
    ///   negative or past ``maximumByteCount``, the content type is not `type/subtype`, or the
    ///   name is empty, too long, a path (`/`, `\`, `..`) or holds a control character.
    public init(sha256: String, byteCount: Int64, contentType: String, name: String? = nil) throws(FileReferenceError) {
        // The wire's usual form is already lowercase: no copy then.
        let hash = Self.isSHA256(sha256) ? sha256 : sha256.lowercased()
        guard Self.isSHA256(hash) else { throw .invalidHash(sha256) }
        guard byteCount >= 0, byteCount <= Self.maximumByteCount else { throw .invalidSize(byteCount) }
        guard let type = Self.normalizedContentType(contentType) else { throw .invalidContentType(contentType) }
        if let name { guard Self.isSafeName(name) else { throw .invalidName(name) } }
        self.sha256 = hash
        self.byteCount = byteCount
        self.contentType = type
        self.name = name
    }

    /// The SHA-256 of no bytes at all.
    public static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// The content type, a prefix of the hash and the size, for logs.
    public var description: String { "\(contentType) file \(sha256.prefix(12))… (\(byteCount) bytes)" }

    // MARK: JSON

    enum CodingKeys: String, CodingKey {
        case sha256
        case byteCount = "size"
        case contentType = "content_type"
        case name
    }

    /// Decodes a reference from its JSON object, checking every part.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let hash = try container.decode(String.self, forKey: .sha256)
        let size = try container.decode(Int64.self, forKey: .byteCount)
        let type = try container.decode(String.self, forKey: .contentType)
        let name = try container.decodeIfPresent(String.self, forKey: .name)
        do {
            try self.init(sha256: hash, byteCount: size, contentType: type, name: name)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    /// Encodes the reference as its JSON object.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sha256, forKey: .sha256)
        try container.encode(byteCount, forKey: .byteCount)
        try container.encode(contentType, forKey: .contentType)
        try container.encodeIfPresent(name, forKey: .name)
    }

    /// The reference as a JSON value (its wire form).
    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "sha256": .string(sha256), "size": .int(byteCount), "content_type": .string(contentType),
        ]
        if let name { fields["name"] = .string(name) }
        return .object(fields)
    }

    /// The wire form as canonical JSON text (keys sorted, no spaces): what a column of a `file`
    /// field holds. The same text as `CanonicalJSON.text(json)`, written without building the object.
    public var canonicalText: String {
        var text = #"{"content_type":"# + CanonicalJSON.text(.string(contentType))
        if let name { text += #","name":"# + CanonicalJSON.text(.string(name)) }
        text += #","sha256":""# + sha256 + #"","size":"# + String(byteCount) + "}"
        return text
    }

    /// Reads a reference's wire form.
    ///
    /// - Throws: ``FileReferenceError`` when `json` is not an object with a valid `sha256`,
    ///   `size` and `content_type` (and `name`, when present), or has other keys.
    public init(json: JSONValue) throws(FileReferenceError) {
        guard case .object(let fields) = json else { throw .notAReference }
        guard case .string(let hash)? = fields["sha256"] else { throw .notAReference }
        let size: Int64
        switch fields["size"] {
        case .int(let number)?: size = number
        case .double(let number)? where number == number.rounded() && abs(number) <= Double(Self.maximumByteCount): size = Int64(number)
        default: throw .notAReference
        }
        guard case .string(let type)? = fields["content_type"] else { throw .notAReference }
        var name: String?
        switch fields["name"] {
        case nil, .null?: name = nil
        case .string(let text)?: name = text
        default: throw .invalidName("\(fields["name"].map(CanonicalJSON.text) ?? "")")
        }
        // Every row naming a file comes through here: the keys are only sorted to name an unknown one.
        if fields.count != (fields["name"] == nil ? 3 : 4),
            let unknown = fields.keys.sorted().first(where: { !["sha256", "size", "content_type", "name"].contains($0) })
        {
            throw .unknownKey(unknown)
        }
        try self.init(sha256: hash, byteCount: size, contentType: type, name: name)
    }

    // MARK: Rules

    /// Whether the file's content type is one of `allowed`: an exact type (`image/jpeg`), a
    /// whole top-level type (`image/*`) or anything (`*/*`). An empty list allows any type.
    public func hasContentType(in allowed: [String]) -> Bool {
        Self.contentType(contentType, isIn: allowed)
    }

    /// Whether `type` (normalized) is one of `allowed`, as ``hasContentType(in:)``.
    public static func contentType(_ type: String, isIn allowed: [String]) -> Bool {
        guard !allowed.isEmpty else { return true }
        let topLevel = type.split(separator: "/", maxSplits: 1).first.map(String.init) ?? type
        return allowed.contains { pattern in
            pattern == "*/*" || pattern == type || (pattern.hasSuffix("/*") && pattern.dropLast(2) == topLevel)
        }
    }

    /// Whether `text` is 64 lowercase hexadecimal digits.
    public static func isSHA256(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// A media type as a reference keeps it: `type/subtype` in RFC 9110's token characters,
    /// lowercased, without parameters (`text/plain; charset=utf-8` is `text/plain`); `nil`
    /// when `text` is not one.
    public static func normalizedContentType(_ text: String) -> String? {
        if isNormalizedContentType(text) { return text }
        let bare = text.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        let type = bare.trimmingCharacters(in: .whitespaces).lowercased()
        guard type.utf8.count <= maximumContentTypeBytes else { return nil }
        let parts = type.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(isTokenByte) }) else { return nil }
        return type
    }

    /// Whether `text` is already a normalized media type (`type/subtype`, lowercase tokens, no
    /// parameters): the form every stored reference has, answered without a copy.
    private static func isNormalizedContentType(_ text: String) -> Bool {
        var slashes = 0
        var partLength = 0
        var count = 0
        for byte in text.utf8 {
            count += 1
            if byte == UInt8(ascii: "/") {
                guard partLength > 0 else { return false }
                slashes += 1
                partLength = 0
            } else {
                guard isTokenByte(byte), !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) else { return false }
                partLength += 1
            }
        }
        return slashes == 1 && partLength > 0 && count <= maximumContentTypeBytes
    }

    /// A content type pattern a contract may list: a type, `type/*` or `*/*`; a `*` stands only
    /// for a whole subtype, or for everything.
    public static func isContentTypePattern(_ text: String) -> Bool {
        if text == "*/*" { return true }
        if text.hasSuffix("/*") {
            let top = text.dropLast(2)
            return !top.isEmpty && !top.contains("*") && top.utf8.allSatisfy(isTokenByte) && top == top.lowercased()
        }
        return !text.contains("*") && normalizedContentType(text) == text
    }

    /// Whether `name` may be a file's display name: 1 to 255 UTF-8 bytes, no path separator, not
    /// `.` or `..`, no control character.
    public static func isSafeName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= maximumNameBytes, name != ".", name != ".." else { return false }
        return !name.unicodeScalars.contains { $0 == "/" || $0 == "\\" || $0.value < 0x20 || $0.value == 0x7F }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}

/// Why a value is not a ``FileReference``.
public enum FileReferenceError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Not a JSON object with `sha256`, `size` and `content_type`.
    case notAReference
    /// The hash is not 64 hexadecimal digits.
    case invalidHash(String)
    /// The size is negative or larger than ``FileReference/maximumByteCount``.
    case invalidSize(Int64)
    /// The content type is not `type/subtype`.
    case invalidContentType(String)
    /// The name is empty, too long, a path or holds a control character.
    case invalidName(String)
    /// The object has a key a reference does not.
    case unknownKey(String)

    /// The error as a field's reason: what a reference must be.
    public var description: String {
        switch self {
        case .notAReference: "must be a file reference: {\"sha256\", \"size\", \"content_type\", \"name\"?}"
        case .invalidHash: "must name its file by its SHA-256, 64 hexadecimal digits"
        case .invalidSize(let size): "states a size of \(size) bytes, which no file has"
        case .invalidContentType(let type): "has the content type '\(type.prefix(80))', which is not type/subtype"
        case .invalidName: "has a name that is empty, longer than 255 bytes, a path, or holds a control character"
        case .unknownKey(let key): "has the key '\(key.prefix(40))', which a file reference does not"
        }
    }
}
