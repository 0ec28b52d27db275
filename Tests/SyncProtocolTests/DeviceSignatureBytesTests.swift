import ContractRuntime
import Foundation
import Testing

@testable import SyncProtocol

/// What a device signs binds every part of a write and of its signer: changing any one of them
/// changes the bytes, so a signature made for one never holds for another.
@Suite("Device signature: the signed bytes")
struct DeviceSignatureBytesTests {
    static let signer = DeviceSignature.Signer(tenant: "acme", userID: "alice", deviceID: "alice-phone", clientID: "client-1")
    static let mutation = Mutation(
        seq: 1, clientMutationId: "cm-1", entity: "Statement", op: .create, id: "st-1",
        payload: .object(["id": .string("st-1"), "verb": .string("experienced")]), baseVersion: nil, hlc: "000001767225000000-00000-n",
        base: nil, occurredAt: nil, hash: nil)

    static func bytes(_ mutation: Mutation = mutation, version: Int = 1, signer: DeviceSignature.Signer = signer) -> Data {
        DeviceSignature.signedBytes(of: mutation, schemaVersion: version, signer: signer)
    }

    @Test("the same write and signer give the same bytes, whatever the payload's member order or the seq")
    func deterministic() {
        var reordered = Self.mutation
        reordered.payload = .object(["verb": .string("experienced"), "id": .string("st-1")])
        reordered.seq = 42
        #expect(Self.bytes() == Self.bytes(reordered))
        #expect(Self.bytes().starts(with: [0, 0, 0, UInt8(DeviceSignature.domain.utf8.count)] + Array(DeviceSignature.domain.utf8)))
    }

    @Test("changing any bound part of the write or the signer changes the bytes")
    func everyPartIsBound() {
        let original = Self.bytes()
        var variants: [(String, Data)] = []
        func vary(_ name: String, _ change: (inout Mutation) -> Void) {
            var mutation = Self.mutation
            change(&mutation)
            variants.append((name, Self.bytes(mutation)))
        }
        vary("client_mutation_id") { $0.clientMutationId = "cm-2" }
        vary("entity") { $0.entity = "Incident" }
        vary("op") { $0.op = .update }
        vary("id") { $0.id = "st-2" }
        vary("payload") { $0.payload = .object(["id": .string("st-1"), "verb": .string("completed")]) }
        vary("no payload") { $0.payload = nil }
        vary("base") { $0.base = ["verb": .string("experienced")] }
        vary("base_version") { $0.baseVersion = 3 }
        vary("hlc") { $0.hlc = nil }
        vary("occurred_at") { $0.occurredAt = Timestamp(millisecondsSince1970: 1) }
        vary("hash") { $0.hash = "00" }
        variants.append(("schema version", Self.bytes(version: 2)))
        for (name, change) in [
            ("tenant", { (s: inout DeviceSignature.Signer) in s.tenant = "globex" }),
            ("user", { (s: inout DeviceSignature.Signer) in s.userID = "mallory" }),
            ("device", { (s: inout DeviceSignature.Signer) in s.deviceID = "alice-tablet" }),
            ("client", { (s: inout DeviceSignature.Signer) in s.clientID = "client-2" }),
            // Text moved between adjacent fields keeps their concatenation, not their length prefixes.
            (
                "tenant and user run together",
                { (s: inout DeviceSignature.Signer) in
                    s.tenant = "acmea"
                    s.userID = "lice"
                }
            ),
        ] {
            var signer = Self.signer
            change(&signer)
            variants.append((name, Self.bytes(signer: signer)))
        }
        for (name, bytes) in variants {
            #expect(bytes != original, "\(name) is not bound")
        }
        #expect(Set(variants.map(\.1)).count == variants.count, "two different changes gave the same bytes")
    }

    @Test("a push item's signature travels in `signature`, read by the push parser and by Codable")
    func wireShape() throws {
        let text = """
            {"client_id":"c","schema":{},"mutations":[{"seq":1,"client_mutation_id":"cm-1","entity":"Statement","op":"create",\
            "id":"st-1","payload":{"id":"st-1"},"signature":"c2lnbmF0dXJl"}]}
            """
        let parsed = try PushRequest(json: try #require(JSONParser.parse(text)))
        #expect(parsed.mutations.first?.signature == "c2lnbmF0dXJl")
        let decoded = try JSONDecoder().decode(PushRequest.self, from: Data(text.utf8))
        #expect(decoded.mutations.first?.signature == "c2lnbmF0dXJl")
        let encoded = String(decoding: try JSONEncoder().encode(decoded), as: UTF8.self)
        #expect(encoded.contains(#""signature":"c2lnbmF0dXJl""#))
        #expect(throws: PushRequest.ShapeError.self) {
            try PushRequest(json: try #require(JSONParser.parse(text.replacingOccurrences(of: #""c2lnbmF0dXJl""#, with: "7"))))
        }
    }
}
