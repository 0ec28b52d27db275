/// ULIDs (26 characters of Crockford base32: 48 bits of milliseconds, 80 random bits) from a
/// seeded generator, as devices make them for row ids and client mutation ids.
struct ULIDMaker {
    private static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
    var random: SeededGenerator

    init(seed: UInt64) {
        random = SeededGenerator(seed: seed)
    }

    mutating func make(milliseconds: Int64) -> String {
        var characters: [Character] = []
        characters.reserveCapacity(26)
        var time = UInt64(max(0, milliseconds))
        var timePart: [Character] = []
        for _ in 0..<10 {
            timePart.append(Self.alphabet[Int(time & 31)])
            time >>= 5
        }
        characters += timePart.reversed()
        var bits = random.next()
        var remaining = 64
        for _ in 0..<16 {
            if remaining < 5 {
                bits = random.next()
                remaining = 64
            }
            characters.append(Self.alphabet[Int(bits & 31)])
            bits >>= 5
            remaining -= 5
        }
        return String(characters)
    }

    /// A random lowercase hex string of `count` characters (checksums).
    mutating func hex(_ count: Int) -> String {
        let digits = Array("0123456789abcdef")
        var text = ""
        text.reserveCapacity(count)
        var bits = random.next()
        var remaining = 16
        for _ in 0..<count {
            if remaining == 0 {
                bits = random.next()
                remaining = 16
            }
            text.append(digits[Int(bits & 15)])
            bits >>= 4
            remaining -= 1
        }
        return text
    }
}
