import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// The audit log's operations and outcomes are typed in code but stored and sealed as text:
/// the texts existing logs hold may never change, or their seals would no longer verify.
@Suite("Audit vocabulary: the stored texts", .blockingWork)
struct AuditVocabularyTests {
    @Test("every operation and outcome of the engine keeps the text existing audit logs hold")
    func storedTexts() {
        let operations: [AuditOperation: String] = [
            .push: "push", .fold: "fold", .create: "create", .update: "update", .patch: "patch", .delete: "delete", .event: "event",
            .publish: "publish", .seed: "seed", .erase: "erase",
        ]
        for (operation, text) in operations { #expect(operation.rawValue == text) }
        // A pushed mutation is audited under its wire operation's name.
        for mutation in MutationOperation.allCases { #expect(AuditOperation(mutation).rawValue == mutation.rawValue) }

        let outcomes: [AuditOutcome: String] = [
            .applied: "applied", .duplicate: "duplicate", .conflicted: "conflicted", .rejected: "rejected", .merged: "merged",
            .published: "published", .deleted: "deleted", .erased: "erased",
        ]
        for (outcome, text) in outcomes { #expect(outcome.rawValue == text) }
        for status in MutationStatus.allCases { #expect(AuditOutcome(status).rawValue == status.rawValue) }
        // A push's entry: each outcome once, sorted, comma separated.
        #expect(AuditOutcome(combining: [.rejected, .applied, .rejected, .conflicted]).rawValue == "applied,conflicted,rejected")
    }

    @Test("an entry's seal covers the operation's and outcome's text, as before they were typed")
    func sealOfTypedEntry() throws {
        let entry = AuditEntry(
            id: 1, tenant: "acme", recordedAt: 1_767_225_600_000, userID: "alice", deviceID: "alice-phone", entity: "Task",
            rowID: "alice-phone:1-2", operation: .push, outcome: AuditOutcome(combining: [.applied, .rejected]), detail: "{}"
        )
        // HMAC-SHA256 under the test key of the length-prefixed fields, computed outside Swift.
        #expect(
            AuditChain.seal(of: entry, previousHash: AuditChain.genesis, key: StorageKind.testAuditKey)
                == "2a052e0a5dfe5428b4795ea2b78c2cfb4858bcd58bed83a221216e6f87e664ea"
        )
    }

    @Test("an operation and an outcome encode as their text")
    func codable() throws {
        let data = try JSONEncoder().encode([AuditOperation.publish.rawValue: AuditOutcome.published])
        #expect(String(decoding: data, as: UTF8.self) == #"{"publish":"published"}"#)
        #expect(try JSONDecoder().decode(AuditOperation.self, from: Data(#""upload""#.utf8)) == AuditOperation("upload"))
    }
}
