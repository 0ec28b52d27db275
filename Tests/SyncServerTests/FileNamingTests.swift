import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Who may put a file in a pushed row: the identity that uploaded it, or one that can read a row
/// already naming it. Knowing a hash (from a row of another team, a log, a guess) is not enough:
/// the push is refused whole with 409 `file_missing`, and nothing of it is applied. On the engines'
/// own contracts (`CardCommented`, a team's event with an attached file, which teammates pull).
@Suite("Files named by pushes")
struct FileNamingTests {
    static let alice = DeviceIdentity(tenant: FileServiceTests.tenant, userID: "alice", deviceID: "alice-phone", teams: ["red"], expiresAt: .max)
    static let bob = DeviceIdentity(
        tenant: FileServiceTests.tenant, userID: "bob", deviceID: "bob-phone", teams: ["red", "blue"], expiresAt: .max)
    static let carol = DeviceIdentity(tenant: FileServiceTests.tenant, userID: "carol", deviceID: "carol-phone", teams: ["blue"], expiresAt: .max)

    static func comment(team: String, photo: FileReference?) -> CardCommented {
        CardCommented(teamId: team, cardId: "card-17", body: "See the photo", attachment: photo)
    }

    static func mutation(_ seq: Int64, id: String, _ event: CardCommented) throws -> Mutation {
        let payload = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(event))
        return Mutation(
            seq: seq, clientMutationId: "cm-\(id)", entity: CardCommented.descriptor.name, op: .event, id: id, payload: payload,
            occurredAt: Timestamp(millisecondsSince1970: 1_767_225_000_000), hash: try EventEnvelope<CardCommented>.hash(of: event))
    }

    @Test(
        "a push naming a file its identity neither uploaded nor can read in a row is refused whole with file_missing; one that can read a row naming it may",
        arguments: StorageKind.allCases)
    func namingNeedsTheFileOrARowNamingIt(kind: StorageKind) async throws {
        let h = try await FileServiceTests.Harness(kind)
        defer { h.remove() }
        let push = PushService(storage: h.rows.storage, reducers: [])
        func refusal(_ mutations: [Mutation], as identity: DeviceIdentity) async -> ServiceError? {
            do {
                _ = try await push.push(PushRequest(clientId: identity.deviceID, schema: [:], mutations: mutations), identity: identity)
                return nil
            } catch {
                return error
            }
        }
        func stored(_ id: String) async throws -> Bool {
            try await h.rows.storage.read { reader in
                try await reader.row(in: ContractTable(CardCommented.descriptor), tenant: FileServiceTests.tenant, id: id) != nil
            }
        }
        let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0]) + FileServiceTests.bytes(3_000, seed: 4)
        let photo = try await h.upload(jpeg, as: Self.alice, type: "image/jpeg")

        // A hash nobody uploaded, and alice's file before any row names it, as carol and bob.
        let unknown = try FileReference(sha256: String(repeating: "ab", count: 32), byteCount: 10, contentType: "image/jpeg")
        let never = await refusal([try Self.mutation(1, id: "ev-unknown", Self.comment(team: "blue", photo: unknown))], as: Self.carol)
        #expect(never?.status == 409 && never?.detail.code == .fileMissing)
        #expect(never?.detail.details == .object(["files": .array([.string(unknown.sha256)])]))
        for identity in [Self.carol, Self.bob] {
            let guessed = await refusal([try Self.mutation(1, id: "ev-\(identity.userID)", Self.comment(team: "blue", photo: photo))], as: identity)
            #expect(guessed?.detail.code == .fileMissing, "\(identity.userID) named a file they never had")
            #expect(try await stored("ev-\(identity.userID)") == false)
        }
        // A refused push applies none of its mutations, not even those without a file.
        let mixed = await refusal(
            [
                try Self.mutation(1, id: "ev-plain", Self.comment(team: "blue", photo: nil)),
                try Self.mutation(2, id: "ev-guess", Self.comment(team: "blue", photo: photo)),
            ], as: Self.carol)
        #expect(mixed?.detail.code == .fileMissing)
        #expect(try await stored("ev-plain") == false)

        // Alice uploaded it: she names it in a row of team red.
        #expect(await refusal([try Self.mutation(1, id: "ev-alice", Self.comment(team: "red", photo: photo))], as: Self.alice) == nil)
        #expect(try await stored("ev-alice"))
        // Bob reads team red: he may now name it (in team blue, too) and read it.
        #expect(await refusal([try Self.mutation(1, id: "ev-bob", Self.comment(team: "blue", photo: photo))], as: Self.bob) == nil)
        #expect(try await h.read(photo, as: Self.bob) == jpeg)
        // Bob's row names it in team blue, which carol reads: now she may read it and name it.
        #expect(try await h.read(photo, as: Self.carol) == jpeg)
        #expect(await refusal([try Self.mutation(1, id: "ev-carol", Self.comment(team: "blue", photo: photo))], as: Self.carol) == nil)
    }
}
