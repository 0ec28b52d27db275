import ContractRuntime
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// A sink kind an app provides, delivered by the engine like its own webhooks: the kind's
/// settings checked when the sink is added (secrets sealed, never shown), its destination,
/// headers and body on every batch, signed; and a sink whose kind the server no longer has is
/// kept, not delivered, and its dead letters not replayed.
@Suite("Sink kinds of an app's own", .blockingWork)
struct SinkKindTests {
    /// Changes as lines of text (`<prefix><contract> <id>`), POSTed to `<url>/lines` with a
    /// bearer token: a kind no engine code knows.
    struct LinesSinkKind: SinkKind {
        var name: String { "lines" }

        func configure(_ settings: [String: String], contracts: [String]?, catalog: ContractCatalog) throws(SinkSettingsError) -> SinkSettings {
            if let unknown = settings.keys.first(where: { $0 != "token" && $0 != "prefix" }) {
                throw SinkSettingsError("a lines sink has no setting `\(unknown)`")
            }
            guard let token = settings["token"] else { throw SinkSettingsError("a lines sink needs its receiver's `token`") }
            return SinkSettings(values: settings["prefix"].map { ["prefix": $0] } ?? [:], secrets: ["token": token], contracts: contracts)
        }

        func destination(of url: String, settings: SinkSettings) -> String { url + "/lines" }

        func headers(of settings: SinkSettings) -> [(name: String, value: String)] {
            [("Authorization", "Bearer \(settings.secrets["token"] ?? "")")]
        }

        func body(for batch: SinkBatch) -> Data? {
            let lines = batch.changes.compactMap { change -> String? in
                guard case .object(let object) = change, case .string(let contract)? = object["contract"], case .string(let id)? = object["id"]
                else { return nil }
                return (batch.settings.values["prefix"] ?? "") + "\(contract) \(id)"
            }
            return lines.isEmpty ? nil : Data(lines.joined(separator: "\n").utf8)
        }
    }

    struct LinesApp: ServerApp {
        var sinkKinds: [any SinkKind] { [LinesSinkKind()] }
    }

    static let token = "lines-receiver-token-0123"

    @Test("an app's sink kind: its settings checked and sealed, its batches shaped by it and signed by the engine", arguments: StorageKind.allCases)
    func anAppsKindIsDeliveredByTheEngine(_ kind: StorageKind) async throws {
        let h = try await SinkTests.harness(kind)
        // The first batch is refused: it waits as a dead letter for the replay below.
        let receiver = TestReceiver(script: [(400, nil)])
        let apps = SampleServerApps.all + [LinesApp()]
        try await receiver.run { base in
            try await h.live(apps: apps) { client in
                try await ChangeFeedTests.join(client, h)
                func add(_ settings: [String: JSONValue], kind: String = "lines") async throws -> TestResponse {
                    try await SinkTests.addSink(
                        client, h,
                        [
                            "id": .string("lines"), "kind": .string(kind), "url": .string(base + "/hooks"), "secret": .string(SinkTests.secret),
                            "contracts": .array([.string("Task")]), kind: .object(settings),
                        ])
                }
                // The kind's own checks reach the admin as 400s; an unknown kind names the kinds there are.
                let missing = try await add(["prefix": .string("> ")])
                #expect(missing.status == .badRequest && missing.bodyText.contains("needs its receiver's `token`"), "\(missing.bodyText)")
                let unknown = try await add(["token": .string(Self.token), "colour": .string("red")])
                #expect(unknown.status == .badRequest && unknown.bodyText.contains("no setting `colour`"), "\(unknown.bodyText)")
                let notAString = try await add(["token": .int(7)])
                #expect(notAString.status == .badRequest)
                let nope = try await add([:], kind: "nope")
                #expect(nope.status == .badRequest && nope.bodyText.contains("lines, webhook, xapi"), "\(nope.bodyText)")

                let added = try await add(["token": .string(Self.token), "prefix": .string("> ")])
                #expect(added.status == .created, "\(added.bodyText)")
                #expect(added.bodyText.contains(#""lines":{"prefix":"> "}"#), "\(added.bodyText)")
                #expect(!added.bodyText.contains(Self.token), "a secret setting is never shown")

                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
                await eventually("the refused batch is a dead letter") { receiver.received.count == 1 }
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(2, "task-2")])
                await eventually("the next batch is delivered") { !receiver.acknowledged.isEmpty }
                let delivered = try #require(receiver.acknowledged.first)
                #expect(delivered.path == "/hooks/lines")
                #expect(String(decoding: delivered.body, as: UTF8.self) == "> Task task-2")
                #expect(delivered.headers["authorization"] == "Bearer \(Self.token)")
                #expect(delivered.headers["outpost-sink"] == "lines" && delivered.headers["idempotency-key"] != nil)
                #expect(SinkTests.isSigned(delivered, secret: SinkTests.secret), "the engine signs every kind's requests")
            }
            // Stored sealed: the database holds the token nowhere in clear.
            let stored = try await h.storage.read { try await $0.serverTableQuery("SELECT sealed_secret, options FROM sinks", []) }
            #expect(!stored.contains { ($0.text("sealed_secret") ?? "").contains(Self.token) || ($0.text("options") ?? "").contains(Self.token) })

            // The same data served without the app: the sink stays, is not delivered, and says why.
            try await h.live { client in
                try await ChangeFeedTests.push(client, h.ownerToken, client: "alice-phone", [ChangeFeedTests.task(3, "task-3")])
                await eventually("the sink says its kind is missing") {
                    (try? await SinkTests.sink(client, h, "lines")["last_error"]) == .string("this server has no sink kind 'lines'")
                }
                let replay = try await client.execute(
                    uri: "/admin/v1/sinks/lines/dead-letters/replay", method: .post,
                    headers: HostileHarness.headers(h.adminToken, [.contentType: "application/json"]), body: ByteBuffer(string: "{}"))
                #expect(replay.status == .conflict && replay.bodyText.contains("sink_kind_unknown"), "\(replay.bodyText)")
                #expect(receiver.received.count == 2, "nothing more was sent")
            }
        }
    }

    /// A sink stored before kinds were open (the xAPI settings as camel-case options, the LRS's
    /// password beside the signing secret) reads as the settings the `xapi` kind takes now.
    @Test func aSinkStoredBeforeKindsWereOpenReadsAsItsKindsSettings() throws {
        let legacy = #"{"activityBase":"https://learn.example.com/a/","contract":"Statement","homePage":"https://learn.example.com","user":"lrs"}"#
        #expect(
            SinkStore.options(legacy)
                == [
                    "activity_base": "https://learn.example.com/a/", "contract": "Statement", "home_page": "https://learn.example.com", "user": "lrs",
                ])
        #expect(SinkStore.options(nil).isEmpty && SinkStore.options("not json").isEmpty)
        // A kind's own camel-case setting is kept as its kind named it.
        #expect(SinkStore.options(#"{"apiKey":"k","home_page":"h"}"#) == ["apiKey": "k", "home_page": "h"])
        // The sealed secrets were {"password", "signing"}: the password is the kind's secret setting.
        let key = try AuditKey(bytes: Data(repeating: 5, count: 32))
        let sealed = try SinkStore.seal(Sink.Secrets(signing: "s-1", settings: ["password": "p-1"]), tenant: "acme", id: "lrs", key: key)
        let opened = try SinkStore.unseal(sealed, tenant: "acme", id: "lrs", key: key)
        #expect(opened == Sink.Secrets(signing: "s-1", settings: ["password": "p-1"]))
        #expect(throws: SinkStoreError.self) { try SinkStore.unseal(sealed, tenant: "acme", id: "other", key: key) }
    }
}
