import ContractRuntime
import Contracts
import Foundation
import SyncProtocol
import Testing

/// `POST /sync/v1/push`: the exact JSON of the request, its mutations and the response
/// (docs/openapi.yaml). Every literal here is what goes over the wire; a key renamed in Swift must not
/// change it.
@Suite("Push wire shape")
struct PushShapeTests {
    static let occurredAt = Timestamp(millisecondsSince1970: 1_769_846_400_123)  // 2026-01-31T08:00:00.123Z

    // MARK: Mutation

    /// Every key a mutation can carry, each once.
    static let fullMutationJSON = """
        {
          "seq": 4,
          "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S3",
          "entity": "Incident",
          "op": "patch",
          "id": "inc-1",
          "payload": {"title": "Leak in hall B", "tags": ["water", "urgent"]},
          "base_version": 7,
          "hlc": "001769846400123-00002-device-7",
          "base": {"title": "Leak", "tags": null},
          "occurred_at": "2026-01-31T08:00:00.123Z",
          "hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        }
        """

    static let fullMutation = Mutation(
        seq: 4, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S3", entity: "Incident", op: .patch, id: "inc-1",
        payload: .object(["title": .string("Leak in hall B"), "tags": .array([.string("water"), .string("urgent")])]),
        baseVersion: 7, hlc: "001769846400123-00002-device-7", base: ["title": .string("Leak"), "tags": .null],
        occurredAt: occurredAt, hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    )

    @Test("A mutation with every field uses exactly the snake_case keys of docs/openapi.yaml")
    func mutationWithEveryField() throws {
        try expectWireShape(Self.fullMutation, is: Self.fullMutationJSON)
        #expect(
            try WireJSON.keys(WireJSON.encoded(Self.fullMutation)) == [
                "seq", "client_mutation_id", "entity", "op", "id", "payload", "base_version", "hlc", "base",
                "occurred_at", "hash",
            ]
        )
    }

    @Test("A create carries the whole row and omits every policy field it does not use")
    func create() throws {
        let mutation = Mutation(
            seq: 1, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S1", entity: "Incident", op: .create, id: "inc-1",
            payload: .object(["id": .string("inc-1"), "title": .string("Leak"), "severity": .int(3), "open": .bool(true)])
        )
        try expectWireShape(
            mutation,
            is: """
                {"seq": 1, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S1", "entity": "Incident", "op": "create",
                 "id": "inc-1", "payload": {"id": "inc-1", "title": "Leak", "severity": 3, "open": true}}
                """
        )
    }

    @Test("A version-checked update carries base_version")
    func versionCheckedUpdate() throws {
        let mutation = Mutation(
            seq: 2, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S2", entity: "Incident", op: .update, id: "inc-1",
            payload: .object(["id": .string("inc-1"), "title": .string("Leak, fixed")]), baseVersion: 1
        )
        try expectWireShape(
            mutation,
            is: """
                {"seq": 2, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S2", "entity": "Incident", "op": "update",
                 "id": "inc-1", "payload": {"id": "inc-1", "title": "Leak, fixed"}, "base_version": 1}
                """
        )
    }

    @Test("A last-writer-wins update carries hlc")
    func lastWriterWinsUpdate() throws {
        let mutation = Mutation(
            seq: 3, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S3", entity: "Note", op: .update, id: "n-1",
            payload: .object(["id": .string("n-1"), "text": .string("hi")]), hlc: "001769846400123-00000-device-7"
        )
        try expectWireShape(
            mutation,
            is: """
                {"seq": 3, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S3", "entity": "Note", "op": "update",
                 "id": "n-1", "payload": {"id": "n-1", "text": "hi"}, "hlc": "001769846400123-00000-device-7"}
                """
        )
    }

    @Test("A delete has no payload key at all, not a null one")
    func delete() throws {
        let mutation = Mutation(
            seq: 5, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S5", entity: "Incident", op: .delete, id: "inc-1",
            baseVersion: 8
        )
        try expectWireShape(
            mutation,
            is: """
                {"seq": 5, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S5", "entity": "Incident", "op": "delete",
                 "id": "inc-1", "base_version": 8}
                """
        )
    }

    @Test("An event carries its payload, occurred_at as ISO-8601 text, and hash")
    func event() throws {
        let mutation = Mutation(
            seq: 6, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S6", entity: "AnswerRecorded", op: .event,
            id: "01JHV3Q6W8X2Z9K4M7N5P0R1S6", payload: .object(["question_id": .string("q-1"), "score": .double(0.5)]),
            occurredAt: Self.occurredAt, hash: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
        )
        try expectWireShape(
            mutation,
            is: """
                {"seq": 6, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S6", "entity": "AnswerRecorded",
                 "op": "event", "id": "01JHV3Q6W8X2Z9K4M7N5P0R1S6", "payload": {"question_id": "q-1", "score": 0.5},
                 "occurred_at": "2026-01-31T08:00:00.123Z",
                 "hash": "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"}
                """
        )
    }

    @Test(
        "A mutation without a required key is refused",
        arguments: ["seq", "client_mutation_id", "entity", "op", "id"]
    )
    func missingRequiredKey(_ key: String) throws {
        let literal = try WireJSON.removing(key, from: Self.fullMutationJSON)
        #expect(throws: DecodingError.self) { try WireJSON.decode(Mutation.self, from: literal) }
    }

    @Test("Optional keys may be left out", arguments: ["payload", "base_version", "hlc", "base", "occurred_at", "hash"])
    func optionalKeyLeftOut(_ key: String) throws {
        let literal = try WireJSON.removing(key, from: Self.fullMutationJSON)
        let mutation = try WireJSON.decode(Mutation.self, from: literal)
        #expect(try WireJSON.encoded(mutation) == WireJSON.canonical(literal))
    }

    @Test("camelCase keys are not the wire form: client_mutation_id is required under its snake_case name")
    func camelCaseKeyIsNotAccepted() throws {
        let literal = try WireJSON.replacing(
            "clientMutationId", with: .string("01JHV3Q6W8X2Z9K4M7N5P0R1S3"),
            in: WireJSON.removing("client_mutation_id", from: Self.fullMutationJSON)
        )
        #expect(throws: DecodingError.self) { try WireJSON.decode(Mutation.self, from: literal) }
    }

    @Test(
        "occurred_at must be an ISO-8601 timestamp",
        arguments: [
            JSONValue.string("yesterday"), .int(1_769_846_400_123), .string("2026-01-31 08:00:00"),
        ])
    func occurredAtMustBeATimestamp(_ value: JSONValue) throws {
        let literal = try WireJSON.replacing("occurred_at", with: value, in: Self.fullMutationJSON)
        #expect(throws: DecodingError.self) { try WireJSON.decode(Mutation.self, from: literal) }
    }

    @Test(
        "Wrongly typed values are refused",
        arguments: [
            ("seq", JSONValue.string("4")), ("seq", .double(4.5)), ("base_version", .string("7")),
            ("entity", .int(1)), ("base", .array([])), ("hlc", .int(1)),
        ])
    func wronglyTypedValue(_ key: String, _ value: JSONValue) throws {
        let literal = try WireJSON.replacing(key, with: value, in: Self.fullMutationJSON)
        #expect(throws: DecodingError.self) { try WireJSON.decode(Mutation.self, from: literal) }
    }

    // MARK: MutationOperation

    @Test("The operations are exactly create, update, patch, delete and event")
    func operations() throws {
        #expect(MutationOperation.allCases.map(\.rawValue) == ["create", "update", "patch", "delete", "event"])
        for operation in MutationOperation.allCases {
            #expect(try WireJSON.encoded(operation) == "\"\(operation.rawValue)\"")
            #expect(try WireJSON.decode(MutationOperation.self, from: "\"\(operation.rawValue)\"") == operation)
        }
    }

    @Test("An unknown op is refused", arguments: ["upsert", "Create", "CREATE", "", " create", "insert"])
    func unknownOperation(_ op: String) throws {
        let literal = try WireJSON.replacing("op", with: .string(op), in: Self.fullMutationJSON)
        #expect(throws: DecodingError.self) { try WireJSON.decode(Mutation.self, from: literal) }
    }

    // MARK: PushRequest

    @Test("A push request is client_id, schema and mutations")
    func pushRequest() throws {
        let request = PushRequest(
            clientId: "device-7", schema: ["Incident": 2, "AnswerRecorded": 1], mutations: [Self.fullMutation]
        )
        try expectWireShape(
            request,
            is: """
                {"client_id": "device-7", "schema": {"Incident": 2, "AnswerRecorded": 1},
                 "mutations": [\(Self.fullMutationJSON)]}
                """
        )
    }

    @Test("An empty push still carries every key")
    func emptyPushRequest() throws {
        try expectWireShape(
            PushRequest(clientId: "device-7", schema: [:], mutations: []),
            is: #"{"client_id": "device-7", "schema": {}, "mutations": []}"#
        )
    }

    @Test("A push request without a required key is refused", arguments: ["client_id", "schema", "mutations"])
    func pushRequestMissingKey(_ key: String) throws {
        let full = #"{"client_id": "device-7", "schema": {"Incident": 2}, "mutations": []}"#
        let literal = try WireJSON.removing(key, from: full)
        #expect(throws: DecodingError.self) { try WireJSON.decode(PushRequest.self, from: literal) }
    }

    @Test("Schema versions are integers")
    func schemaVersionsAreIntegers() throws {
        let literal = #"{"client_id": "device-7", "schema": {"Incident": "2"}, "mutations": []}"#
        #expect(throws: DecodingError.self) { try WireJSON.decode(PushRequest.self, from: literal) }
    }

    // MARK: MutationStatus and MutationResult

    @Test("The statuses are exactly applied, duplicate, conflicted and rejected")
    func statuses() throws {
        #expect(MutationStatus.allCases.map(\.rawValue) == ["applied", "duplicate", "conflicted", "rejected"])
        for status in MutationStatus.allCases {
            #expect(try WireJSON.encoded(status) == "\"\(status.rawValue)\"")
            #expect(try WireJSON.decode(MutationStatus.self, from: "\"\(status.rawValue)\"") == status)
        }
    }

    @Test("An unknown status is refused", arguments: ["ok", "Applied", "failed", "conflict", ""])
    func unknownStatus(_ status: String) throws {
        let literal = #"{"seq": 1, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S1", "status": "\#(status)"}"#
        #expect(throws: DecodingError.self) { try WireJSON.decode(MutationResult.self, from: literal) }
    }

    @Test("An applied result carries the new server_version and nothing else")
    func appliedResult() throws {
        try expectWireShape(
            MutationResult(seq: 1, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S1", status: .applied, serverVersion: 1),
            is: #"{"seq": 1, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S1", "status": "applied", "server_version": 1}"#
        )
    }

    @Test("A bare result omits every optional key")
    func bareResult() throws {
        try expectWireShape(
            MutationResult(seq: 9, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S9", status: .duplicate),
            is: #"{"seq": 9, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S9", "status": "duplicate"}"#
        )
    }

    @Test("A conflicted result carries server_version and server_row")
    func conflictedResult() throws {
        let result = MutationResult(
            seq: 2, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S2", status: .conflicted, serverVersion: 3,
            serverRow: .object(["id": .string("inc-1"), "title": .string("Leak (server)"), "version": .int(3)])
        )
        try expectWireShape(
            result,
            is: """
                {"seq": 2, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S2", "status": "conflicted",
                 "server_version": 3, "server_row": {"id": "inc-1", "title": "Leak (server)", "version": 3}}
                """
        )
    }

    @Test("A settled conflict says its resolution", arguments: ["merged", "won", "lost"])
    func resolvedResult(_ resolution: String) throws {
        let result = MutationResult(
            seq: 3, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S3", status: .applied, serverVersion: 5,
            serverRow: .object(["id": .string("n-1")]), resolution: resolution
        )
        try expectWireShape(
            result,
            is: """
                {"seq": 3, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S3", "status": "applied",
                 "server_version": 5, "server_row": {"id": "n-1"}, "resolution": "\(resolution)"}
                """
        )
    }

    @Test("A rejected result carries error.code and error.message, and error.details when given")
    func rejectedResult() throws {
        try expectWireShape(
            MutationResult(
                seq: 4, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S4", status: .rejected,
                error: ErrorDetail(code: .invalidPayload, message: "title: longer than 200 characters")
            ),
            is: """
                {"seq": 4, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S4", "status": "rejected",
                 "error": {"code": "invalid_payload", "message": "title: longer than 200 characters"}}
                """
        )
        try expectWireShape(
            MutationResult(
                seq: 5, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S5", status: .rejected,
                error: ErrorDetail(
                    code: .missingPolicyData, message: "Incident needs base_version",
                    details: .object(["field": .string("base_version")])
                )
            ),
            is: """
                {"seq": 5, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S5", "status": "rejected",
                 "error": {"code": "missing_policy_data", "message": "Incident needs base_version",
                           "details": {"field": "base_version"}}}
                """
        )
    }

    @Test("A result with every field uses exactly the keys of docs/openapi.yaml")
    func resultWithEveryField() throws {
        let result = MutationResult(
            seq: 6, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S6", status: .conflicted, serverVersion: 4,
            serverRow: .object([:]), resolution: "lost", error: ErrorDetail(code: .invalidTransition, message: "no")
        )
        #expect(
            try WireJSON.keys(WireJSON.encoded(result)) == [
                "seq", "client_mutation_id", "status", "server_version", "server_row", "resolution", "error",
            ]
        )
    }

    @Test("A result without a required key is refused", arguments: ["seq", "client_mutation_id", "status"])
    func resultMissingKey(_ key: String) throws {
        let full = #"{"seq": 1, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S1", "status": "applied"}"#
        let literal = try WireJSON.removing(key, from: full)
        #expect(throws: DecodingError.self) { try WireJSON.decode(MutationResult.self, from: literal) }
    }

    // MARK: PushResponse

    @Test("A push response is results and last_seq")
    func pushResponse() throws {
        let response = PushResponse(
            results: [
                MutationResult(seq: 1, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S1", status: .applied, serverVersion: 1),
                MutationResult(seq: 2, clientMutationId: "01JHV3Q6W8X2Z9K4M7N5P0R1S2", status: .duplicate),
            ],
            lastSeq: 2
        )
        try expectWireShape(
            response,
            is: """
                {"results": [
                   {"seq": 1, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S1", "status": "applied", "server_version": 1},
                   {"seq": 2, "client_mutation_id": "01JHV3Q6W8X2Z9K4M7N5P0R1S2", "status": "duplicate"}],
                 "last_seq": 2}
                """
        )
    }

    @Test("An empty push response still carries both keys")
    func emptyPushResponse() throws {
        try expectWireShape(PushResponse(results: [], lastSeq: 0), is: #"{"results": [], "last_seq": 0}"#)
    }

    @Test("A push response without a required key is refused", arguments: ["results", "last_seq"])
    func pushResponseMissingKey(_ key: String) throws {
        let literal = try WireJSON.removing(key, from: #"{"results": [], "last_seq": 0}"#)
        #expect(throws: DecodingError.self) { try WireJSON.decode(PushResponse.self, from: literal) }
    }
}
