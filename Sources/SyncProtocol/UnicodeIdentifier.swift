import Foundation

/// The one rule for comparing identifiers (tenant, user, device, team, scope key, row id, client
/// id, contract name): byte for byte, and only in Unicode Normalization Form C.
///
/// Swift's `String ==` (and its hashing) treats canonically equivalent spellings as equal
/// (`josé` written with U+00E9, or as `e` + U+0301), while SQLite and PostgreSQL compare bytes.
/// Were both spellings accepted, one code path would find a user's data under the other
/// spelling and the next would not. NFC gives every canonical-equivalence class exactly one
/// spelling, so once every identifier is NFC, Swift's equality and the databases' agree. The
/// server refuses any other spelling (`identifier_not_normalized`) instead of rewriting it, so
/// a name never silently becomes another. Compatibility forms (`ﬁ` and `fi`, full-width
/// letters) are not canonically equivalent: they stay distinct identifiers everywhere.
public enum UnicodeIdentifier {
    /// Whether `text` is in Normalization Form C. ASCII text always is, and is checked without
    /// normalizing anything.
    public static func isNormalized(_ text: some StringProtocol) -> Bool {
        // Every id of every mutation passes here: the ASCII check runs over the contiguous bytes
        // (a generic walk of `UTF8View` cost a server 3 % of a push's CPU).
        let ascii = text.utf8.withContiguousStorageIfAvailable(isASCII) ?? text.utf8.allSatisfy { $0 < 0x80 }
        if ascii { return true }
        let string = String(text)
        return string.precomposedStringWithCanonicalMapping.utf8.elementsEqual(string.utf8)
    }

    /// Whether every byte is below 0x80, eight at a time.
    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        var index = 0
        let raw = UnsafeRawPointer(base)
        while index + 8 <= count {
            if raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            index += 8
        }
        while index < count {
            if base[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }

    /// `text` in Normalization Form C, for a message that suggests the accepted spelling.
    public static func normalized(_ text: String) -> String {
        text.precomposedStringWithCanonicalMapping
    }
}
