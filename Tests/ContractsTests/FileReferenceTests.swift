import ContractRuntime
import Foundation
import Testing

/// A file reference's wire form: what it accepts, how it normalizes, and the canonical text a
/// `file` column holds.
@Suite("File references")
struct FileReferenceTests {
    static let hash = String(repeating: "0123456789abcdef", count: 4)

    @Test("the wire form reads back; a hash in capitals and a type with parameters are normalized")
    func readsAndNormalizes() throws {
        let plain = try FileReference(json: .object(["sha256": .string(Self.hash), "size": .int(42), "content_type": .string("image/jpeg")]))
        #expect(plain.sha256 == Self.hash && plain.byteCount == 42 && plain.contentType == "image/jpeg" && plain.name == nil)
        let loud = try FileReference(
            json: .object([
                "sha256": .string(Self.hash.uppercased()), "size": .double(42), "content_type": .string("Text/Plain; charset=utf-8"),
                "name": .string("notes.txt"),
            ]))
        #expect(loud.sha256 == Self.hash && loud.contentType == "text/plain" && loud.name == "notes.txt")
    }

    @Test("what is not a reference is refused with the reason: a key it does not have, a path for a name, a bad hash, type or size")
    func refusals() {
        func refusal(_ fields: [String: JSONValue]) -> FileReferenceError? {
            var all: [String: JSONValue] = ["sha256": .string(Self.hash), "size": .int(1), "content_type": .string("image/png")]
            for (key, value) in fields { all[key] = value }
            do {
                _ = try FileReference(json: .object(all))
                return nil
            } catch {
                return error
            }
        }
        #expect(refusal(["url": .string("https://example.com/x")]) == .unknownKey("url"))
        #expect(refusal(["name": .string("x.png"), "path": .string("/tmp")]) == .unknownKey("path"))
        #expect(refusal(["name": .string("../../etc/passwd")]) == .invalidName("../../etc/passwd"))
        #expect(refusal(["name": .string("a\u{0}b")]) == .invalidName("a\u{0}b"))
        #expect(refusal(["sha256": .string("abc")]) == .invalidHash("abc"))
        #expect(refusal(["content_type": .string("image")]) == .invalidContentType("image"))
        #expect(refusal(["content_type": .string("image/png/x")]) == .invalidContentType("image/png/x"))
        #expect(refusal(["size": .int(-1)]) == .invalidSize(-1))
        #expect(refusal(["size": .string("1")]) == .notAReference)
        #expect(refusal([:]) == nil)
    }

    @Test("the canonical text is the canonical JSON of the wire form, names with quotes and accents included")
    func canonicalText() throws {
        for name in [nil, "photo.jpg", "say \"cheese\".jpg", "Zürich — façade.heic", "back\\slash"] {
            guard let reference = try? FileReference(sha256: Self.hash, byteCount: 2_000_000_000, contentType: "image/heic", name: name) else {
                #expect(name == "back\\slash", "only a path is refused")
                continue
            }
            #expect(try reference.canonicalText == CanonicalJSON.text(reference.json), "\(name ?? "no name")")
            let parsed = try JSONDecoder().decode(JSONValue.self, from: Data(reference.canonicalText.utf8))
            let readBack = try FileReference(json: parsed)
            #expect(readBack == reference)
        }
    }
}
