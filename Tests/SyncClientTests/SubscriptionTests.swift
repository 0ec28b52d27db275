import ContractRuntime
import EngineTestContracts
import Foundation
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

@testable import SyncServer

/// Subscriptions on a device against the real server on loopback, on real SQLite files, on the
/// engines' own contracts: a device that does not sync the team scope subscribes to one card,
/// gets it with the board it is on, follows its changes and its leaving, is refused another
/// team's row, and lets rows go only when their TTL passed and nothing else holds them.
@Suite("Subscriptions on a device", .blockingWork)
struct SubscriptionTests {
    /// The engine of a device that syncs only the user scope: team rows reach it through subscriptions alone.
    static func engine(_ store: OfflineStore, _ transport: any SyncTransport, scopes: [String] = ["user"]) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport,
            configuration: SyncEngineConfiguration(scopes: scopes, pullPageSize: 3, retriesAutomatically: false))
    }

    static func succeeded(_ result: SyncResult) -> Bool {
        if case .succeeded = result { return true }
        Issue.record("the sync failed: \(result)")
        return false
    }

    /// Writes a card straight into the server's storage, as a push would.
    static func card(
        _ server: LiveServer, _ id: String, team: String = "team-1", assignee: String? = nil, board: String = "board-0", title: String = "Draft"
    ) async throws {
        var fields: [String: JSONValue] = [
            "id": .string(id), "team_id": .string(team), "board_id": .string(board), "title": .string(title), "lane": .string("todo"),
            "revision": .int(1),
        ]
        if let assignee { fields["assignee_id"] = .string(assignee) }
        try await store(server, Card.descriptor, fields, scopeKey: "workspace:team:\(team)")
    }

    static func board(_ server: LiveServer, _ id: String, team: String = "team-1") async throws {
        try await store(
            server, Board.descriptor,
            [
                "id": .string(id), "team_id": .string(team), "owner_id": .string("u-2"), "name": .string("Board \(id)"),
                "created_at": .string("2026-01-31T08:00:00.000Z"), "updated_at": .string("2026-01-31T08:00:00.000Z"),
            ], scopeKey: "workspace:team:\(team)")
    }

    static func store(_ server: LiveServer, _ entity: EntityDescriptor, _ fields: [String: JSONValue], scopeKey: String) async throws {
        try await server.storeRow(entity, fields, scopeKey: scopeKey)
    }

    /// The cursor the store holds for a subscription.
    static func cursor(_ store: OfflineStore, _ handle: SubscriptionHandle) throws -> String? {
        try store.activeSubscriptions().first { $0.id == handle.id }?.cursor
    }

    @Test("subscribing to one card brings it and its board, nothing else of the team; its changes follow, and it survives a restart")
    func oneCard() async throws {
        try await LiveServer.engine { server in
            try await Self.board(server, "board-1")
            try await Self.card(server, "c-1", board: "board-1")
            try await Self.card(server, "c-2")
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            let engine = Self.engine(store, server.transport("d-1"))

            let card = try await engine.subscribe(Subscriptions.card(id: "c-1"))
            #expect(await engine.currentStatus.subscriptions.awaitingFirstSync == 1)
            try await card.waitForFirstSync()
            #expect(try store.fetch(Card.self, id: "c-1")?.title == "Draft")
            #expect(try store.fetch(Board.self, id: "board-1") != nil)
            #expect(try store.fetch(Card.self, id: "c-2") == nil)
            let status = try #require(try card.status)
            #expect(status.hasSynced && status.isActive && status.rowCount == 2 && status.lastSyncedAt != nil)
            #expect(status.priority == .normal && status.ttl == .seconds(7 * 86_400) && status.expiresAt == nil)
            #expect(status.progress == nil && status.lastFailure == nil && status.error == nil)
            #expect(try store.subscriptionRowIDs(id: card.id) == ["Card": ["c-1"], "Board": ["board-1"]])
            let counts = await engine.currentStatus.subscriptions
            #expect(counts.active == 1 && counts.awaitingFirstSync == 0 && counts.rows == 2 && counts.ended == 0 && counts.refused == 0)

            // A change on the server comes with the next sync.
            try await Self.card(server, "c-1", board: "board-1", title: "Book the venue")
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.fetch(Card.self, id: "c-1")?.title == "Book the venue")

            // Subscriptions survive a restart, cursor and rows included.
            let reopened = try makeEngineDeviceStore(directory, device: "d-1")
            let again = try Self.engine(reopened, server.transport("d-1")).subscriptions()
            #expect(again.map(\.request) == [Subscriptions.card(id: "c-1")])
            #expect(try again.first?.status?.hasSynced == true)
            #expect(try again.first?.status?.rowCount == 2)
            #expect(try reopened.fetch(Card.self, id: "c-1")?.title == "Book the venue")
        }
    }

    @Test("a started engine syncs a new subscription at once, and a live poke about its scope brings its changes")
    func startedAndPoked() async throws {
        try await LiveServer.engine { server in
            try await Self.card(server, "c-1")
            // Held until the end: the folder is deleted when it is released, under the open store.
            let storeFolder = try TemporaryDirectory()
            defer { withExtendedLifetime(storeFolder) {} }
            let store = try makeEngineDeviceStore(storeFolder, device: "d-1")
            // Its timer would sync only after an hour: what arrives sooner came by itself or by a poke.
            let engine = SyncEngine(
                store: store, transport: server.transport("d-1"),
                configuration: SyncEngineConfiguration(scopes: ["user"], retry: RetryPolicy(jitter: 0), periodicInterval: 3600))
            await engine.start(connectivity: ManualConnectivityMonitor(online: true))
            await eventually("the engine's live channel is open", within: 30) { await engine.currentStatus.live == .connected }

            let card = try await engine.subscribe(Subscriptions.card(id: "c-1"))
            await eventually("the subscription synced without being asked", within: 30) { (try? card.status?.hasSynced) == true }
            #expect(try store.fetch(Card.self, id: "c-1") != nil)

            // The team scope is not synced whole here: the poke about it is what pulls the subscription.
            try await Self.card(server, "c-1", title: "Changed live")
            await eventually("the change arrived", within: 30) {
                (try? store.fetch(Card.self, id: "c-1"))?.title == "Changed live"
            }
            await engine.stop()
        }
    }

    @Test("a row that stops matching leaves the device, unless something else holds it")
    func leaves() async throws {
        try await LiveServer.engine { server in
            try await Self.card(server, "c-3", assignee: "u-1")
            try await Self.card(server, "c-4", assignee: "u-1")
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            let engine = Self.engine(store, server.transport("d-1"))
            let mine = try await engine.subscribe(Subscriptions.assignedCards())
            let pinned = try await engine.subscribe(Subscriptions.card(id: "c-4"))
            try await mine.waitForFirstSync()
            try await pinned.waitForFirstSync()
            #expect(try store.count(Card.self) == 2)
            #expect(try mine.status?.priority == .critical)

            try await Self.card(server, "c-3", assignee: "u-9")
            try await Self.card(server, "c-4", assignee: "u-9")
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.fetch(Card.self, id: "c-3") == nil, "left the subscription, held by nothing")
            #expect(try store.fetch(Card.self, id: "c-4")?.assigneeId == "u-9", "still held by its own subscription")
            #expect(try mine.status?.rowCount == 0)
        }
    }

    @Test("when space is short, ended subscriptions go first, then never-used old ones, then the least recently used; evict() lets go now")
    func evictionOrder() async throws {
        try await LiveServer.engine { server in
            for id in ["c-old", "c-used", "c-recent", "c-ended", "c-new"] { try await Self.card(server, id) }
            let directory = try TemporaryDirectory()
            let clock = ManualClock(TestStore.start)
            let store = try makeEngineDeviceStore(directory, device: "d-1", clock: clock)
            let engine = Self.engine(store, server.transport("d-1"))
            func at(day: Double) { clock.set(TestStore.start.addingTimeInterval(day * 86_400)) }
            var handles: [String: SubscriptionHandle] = [:]
            for (id, day) in [("c-old", 0.0), ("c-used", 0), ("c-recent", 1), ("c-ended", 1), ("c-new", 4)] {
                at(day: day)
                handles[id] = try await engine.subscribe(Subscriptions.card(id: id))
            }
            #expect(Self.succeeded(await engine.syncNow()))
            at(day: 4.5)
            try handles["c-used"]?.markUsed()
            at(day: 4.6)
            try handles["c-recent"]?.markUsed()
            try await handles["c-ended"]?.unsubscribe(keepingFor: .seconds(86_400))
            #expect(try handles["c-ended"]?.status?.expiresAt == TestStore.start.addingTimeInterval(5.6 * 86_400))
            #expect(try handles["c-recent"]?.status?.lastUsedAt == TestStore.start.addingTimeInterval(4.6 * 86_400))

            let order = try store.subscriptionsInEvictionOrder(neverUsedAge: .seconds(3 * 86_400))
            let ids = order.map { status in handles.first { $0.value.id == status.id }?.key ?? "?" }
            // c-new was never used but is young: ranked by its last sync (day 4), before c-used (4.5).
            #expect(ids == ["c-ended", "c-old", "c-new", "c-used", "c-recent"])

            // A queued write keeps its row through an eviction; the rest goes now, whatever the TTL.
            var edited = try #require(try store.fetch(Card.self, id: "c-old"))
            edited.title = "Edited offline"
            _ = try store.update(edited)
            #expect(try await handles["c-old"]?.evict() == [:])
            #expect(try store.fetch(Card.self, id: "c-old") != nil, "its write is not on the server yet")
            #expect(try await handles["c-ended"]?.evict() == ["Card": 1])
            #expect(try store.fetch(Card.self, id: "c-ended") == nil)
            #expect(try engine.subscription(id: handles["c-ended"]!.id) == nil)
            await #expect(throws: SubscriptionError.notFound(id: handles["c-ended"]!.id)) { try await handles["c-ended"]!.evict() }
            #expect(throws: SubscriptionError.notFound(id: "nope")) { try store.markSubscriptionUsed(id: "nope") }
        }
    }

    @Test("a row kept past its subscription's TTL for a queued write goes once the write is on the server")
    func aRowKeptForItsWriteGoesOnceTheWriteIsOnTheServer() async throws {
        try await LiveServer.engine { server in
            try await Self.card(server, "c-7")
            let directory = try TemporaryDirectory()
            let clock = ManualClock(TestStore.start)
            let store = try makeEngineDeviceStore(directory, device: "d-1", clock: clock)
            let engine = Self.engine(store, server.transport("d-1"))
            let card = try await engine.subscribe(Subscriptions.card(id: "c-7"))
            try await card.waitForFirstSync()
            var edited = try #require(try store.fetch(Card.self, id: "c-7"))
            edited.title = "Edited offline"
            _ = try store.update(edited)
            try await card.unsubscribe(keepingFor: .seconds(60))
            clock.advance(by: 120)
            try store.runHousekeeping()
            #expect(try card.status == nil, "the subscription expired")
            #expect(try store.fetch(Card.self, id: "c-7")?.title == "Edited offline", "kept for its write")

            // The sync pushes the write; its housekeeping then lets the row go: nothing holds it.
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.fetch(Card.self, id: "c-7") == nil)
            #expect(try store.outboxEntries(statuses: OutboxStatus.unsynced).isEmpty, "the write is on the server")
        }
    }

    @Test("another team's card is refused with a typed error, nothing of it is kept, and the scopes sync all the same")
    func forbidden() async throws {
        try await LiveServer.engine { server in
            try await Self.card(server, "c-9", team: "team-2")
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            let engine = Self.engine(store, server.transport("d-1"))
            let stolen = try await engine.subscribe(Subscriptions.card(id: "c-9"))
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.syncStates().first { $0.scopeKey == "user" }?.lastSuccessAt != nil, "the scope synced beside the refusal")
            // Refused: pulled no more, its error there for the app until it reads it.
            let refused = try #require(try stolen.status)
            #expect(refused.error?.code == .forbidden && !refused.isActive && refused.rowCount == 0)
            #expect(await engine.currentStatus.subscriptions.refused == 1)

            await #expect(throws: SubscriptionError.forbidden(message: refused.error?.message ?? "")) { try await stolen.waitForFirstSync() }
            await #expect(throws: SubscriptionError.notFound(id: stolen.id), "the refused subscription is gone once read") {
                try await stolen.waitForFirstSync()
            }
            #expect(try store.fetch(Card.self, id: "c-9") == nil)
            #expect(try store.subscriptions().isEmpty)
            #expect(await engine.currentStatus.subscriptions == SubscriptionCounts())
        }
    }

    @Test("a subscription is checked against its contract before anything is stored")
    func checkedFirst() async throws {
        let directory = try TemporaryDirectory()
        let store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: directory.databaseURL, tenantId: "acme", userId: "u-1", deviceId: "d-1",
                keyProvider: FileKeyProvider(directory: directory.keysURL)
            ), contracts: ContractRegistry.self
        )
        let engine = Self.engine(store, NoSubscriptionTransport())
        let refusals: [(SubscriptionRequest, SubscriptionError)] = [
            (
                SubscriptionRequest(name: "everything"),
                .unknownSubscription(name: "everything", known: ["assigned_cards", "board", "card", "cards", "cards_in_lane", "open_cards"])
            ),
            (SubscriptionRequest(name: "card"), .invalidParameter(name: "id", reason: "'card' needs it (id)")),
            (
                SubscriptionRequest(name: "card", parameters: ["id": .string("c-1"), "team": .string("t-1")]),
                .invalidParameter(name: "team", reason: "'card' takes no parameter 'team'; it takes id")
            ),
            (
                SubscriptionRequest(name: "card", parameters: ["id": .int(7)]),
                .invalidParameter(name: "id", reason: "takes id values as strings, not 7")
            ),
            (
                SubscriptionRequest(name: "card", parameters: ["id": .string("")]),
                .invalidParameter(name: "id", reason: "a value cannot be empty")
            ),
            (
                SubscriptionRequest(name: "card", parameters: ["id": .string("a\u{7}b")]),
                .invalidParameter(name: "id", reason: "a value cannot hold a control character")
            ),
            (
                SubscriptionRequest(name: "cards", parameters: ["ids": .array((0...20).map { JSONValue.string("c-\($0)") })]),
                .invalidParameter(name: "ids", reason: "takes at most 20 values; it has 21")
            ),
            (
                SubscriptionRequest(name: "cards", parameters: ["ids": .array([])]),
                .invalidParameter(name: "ids", reason: "takes a non-empty array of id values")
            ),
            (
                SubscriptionRequest(name: "cards_in_lane", parameters: ["board_id": .string("board-1"), "lane": .string("lost")]),
                .invalidParameter(name: "lane", reason: "'lost' is not one of todo, doing, review, done")
            ),
            (
                SubscriptionRequest(name: "card", parameters: ["id": .string("c-1")], scope: "workspace:user:u-1"),
                .invalidParameter(name: "scope", reason: "'card' reads the scope 'team', not 'user'")
            ),
        ]
        for (request, expected) in refusals {
            await #expect(throws: expected, "\(request)") { _ = try await engine.subscribe(request) }
        }
        await #expect(throws: SubscriptionError.invalidParameter(name: "ttl", reason: "a TTL cannot be negative")) {
            _ = try await engine.subscribe(Subscriptions.card(id: "c-1"), ttl: .seconds(-1))
        }
        #expect(try store.subscriptions().isEmpty)

        // Accepted: a list within its count, an enum value; the same request twice is one subscription.
        let listed = try await engine.subscribe(
            SubscriptionRequest(name: "cards", parameters: ["ids": .array(["c-1", "c-2", "c-3"].map(JSONValue.string))]))
        let stated = try await engine.subscribe(
            SubscriptionRequest(name: "cards_in_lane", parameters: ["board_id": .string("board-1"), "lane": .string("review")]), ttl: .seconds(60),
            priority: .low)
        #expect(
            try await engine.subscribe(
                SubscriptionRequest(name: "cards", parameters: ["ids": .array(["c-1", "c-2", "c-3"].map(JSONValue.string))])
            ).id == listed.id)
        #expect(try store.subscriptions().map(\.id) == [listed.id, stated.id])
        #expect(try stated.status?.priority == .low && stated.status?.ttl == .seconds(60))
        #expect(try listed.status?.ttl == .seconds(86_400) && listed.status?.priority == .normal, "the contract's defaults")
    }

    @Test("after unsubscribing, rows stay until the TTL passes, then go unless a queued write or another subscription holds them")
    func eviction() async throws {
        let clock = ManualClock()
        try await LiveServer.engine(clock: DeviceFollowingClock(device: clock)) { server in
            for id in ["c-1", "c-2", "c-3", "c-4"] { try await Self.card(server, id, assignee: id == "c-3" ? "u-1" : nil) }
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1", clock: clock)
            let engine = Self.engine(store, server.transport("d-1"))
            let one = try await engine.subscribe(Subscriptions.card(id: "c-1"), ttl: .seconds(60))
            let two = try await engine.subscribe(Subscriptions.card(id: "c-2"), ttl: .seconds(60))
            let three = try await engine.subscribe(Subscriptions.card(id: "c-3"), ttl: .seconds(60))
            let mine = try await engine.subscribe(Subscriptions.assignedCards())
            for handle in [one, two, three, mine] { try await handle.waitForFirstSync() }
            let ended = clock.now()
            for handle in [one, two, three] { try await handle.unsubscribe() }
            #expect(try one.status?.expiresAt == ended.addingTimeInterval(60))
            #expect(try one.status?.isActive == false)
            #expect(await engine.currentStatus.subscriptions.ended == 3)
            // A write of c-2 waits in the outbox (housekeeping runs here, no sync pushes it).
            var edited = try #require(try store.fetch(Card.self, id: "c-2"))
            edited.title = "Edited offline"
            _ = try store.update(edited)

            // Within the TTL everything stays readable.
            clock.advance(by: 30)
            #expect(try store.runHousekeeping().subscriptionEvictions.isEmpty)
            #expect(try store.count(Card.self) == 3)

            clock.advance(by: 31)
            #expect(try store.runHousekeeping().subscriptionEvictions == ["Card": 1])
            #expect(try store.fetch(Card.self, id: "c-1") == nil, "expired, held by nothing")
            #expect(try store.fetch(Card.self, id: "c-2")?.title == "Edited offline", "a queued write keeps it")
            #expect(try store.fetch(Card.self, id: "c-3") != nil, "assigned_cards still holds it")
            #expect(try store.subscriptions().map(\.request) == [Subscriptions.assignedCards()])
            #expect(try one.status == nil)

            // Subscribing again to an ended one makes it active again rather than a second one.
            let back = try await engine.subscribe(Subscriptions.assignedCards())
            #expect(back.id == mine.id)

            // A sync expires them too, before it pulls.
            let four = try await engine.subscribe(Subscriptions.card(id: "c-4"), ttl: .seconds(60))
            try await four.waitForFirstSync()
            try await four.unsubscribe()
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.fetch(Card.self, id: "c-4") != nil, "ended, not expired: still readable")
            clock.advance(by: 61)
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.fetch(Card.self, id: "c-4") == nil)
            #expect(try four.status == nil)
        }
    }

    @Test("rows of a scope key the engine syncs whole stay when a subscription lets go of them; another key's go")
    func wholeScopes() async throws {
        try await LiveServer.engine { server in
            _ = try await server.storage.write { try await $0.setTeamMembership(tenant: "acme", team: "team-2", userID: "u-1", isMember: true) }
            try await Self.card(server, "c-1")
            try await Self.card(server, "c-20", team: "team-2")
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            let transport = URLSessionTransport(baseURL: server.url, timeout: 120) {
                server.signer.token(
                    tenant: "acme", user: "u-1", device: "d-1", teams: ["team-1", "team-2"], now: server.clock.now().millisecondsSince1970 / 1000)
            }
            let engine = Self.engine(store, transport, scopes: ["user", "workspace:team:team-1"])
            let ours = try await engine.subscribe(Subscriptions.card(id: "c-1", scope: "workspace:team:team-1"), ttl: .zero)
            let theirs = try await engine.subscribe(Subscriptions.card(id: "c-20", scope: "workspace:team:team-2"), ttl: .zero)
            try await ours.waitForFirstSync()
            try await theirs.waitForFirstSync()
            #expect(try store.fetch(Card.self, id: "c-20") != nil)

            try await ours.unsubscribe()
            try await theirs.unsubscribe()
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.subscriptions().isEmpty)
            #expect(try store.fetch(Card.self, id: "c-1") != nil, "workspace:team:team-1 is synced whole")
            #expect(try store.fetch(Card.self, id: "c-20") == nil, "workspace:team:team-2 is not")
        }
    }

    @Test("a cursor the server expired syncs that subscription again from scratch, and the rows it no longer delivers go")
    func cursorExpired() async throws {
        try await LiveServer.engine { server in
            try await Self.card(server, "c-1", assignee: "u-1")
            try await Self.card(server, "c-2", assignee: "u-1")
            try await Self.card(server, "c-3")
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            let probe = SubscriptionProbe(server.transport("d-1"))
            let engine = Self.engine(store, probe)
            let mine = try await engine.subscribe(Subscriptions.assignedCards())
            let pinned = try await engine.subscribe(Subscriptions.card(id: "c-3"))
            try await mine.waitForFirstSync()
            try await pinned.waitForFirstSync()
            let stale = try #require(try Self.cursor(store, mine))

            // `mine` ended for a while: `pinned` moves on meanwhile, `mine` keeps its old cursor.
            try await mine.unsubscribe()
            try await Self.card(server, "c-3", title: "Moved on")
            #expect(Self.succeeded(await engine.syncNow()))
            let pinnedCursor = try #require(try Self.cursor(store, pinned))
            let head = try await server.storage.read { try await $0.scopeSequence(tenant: "acme", scopeKey: "workspace:team:team-1") }
            // c-2 is reassigned, and the server compacts what came before: `mine`'s cursor is now too old.
            try await Self.card(server, "c-2", assignee: "u-9")
            try await server.storage.write { try await $0.raiseCompactedSequence(tenant: "acme", scopeKey: "workspace:team:team-1", to: head) }

            #expect(try await engine.subscribe(Subscriptions.assignedCards()).id == mine.id)
            probe.clear()
            #expect(Self.succeeded(await engine.syncNow()))
            let sent = probe.entries.filter { $0.id == mine.id }.map(\.cursor)
            #expect(sent.count == 2 && sent.first == stale && sent.last == .some(nil), "asked with its cursor, refused, asked again from none")
            #expect(probe.entries.filter { $0.id == pinned.id }.map(\.cursor) == [pinnedCursor], "the other one went on from its cursor")
            #expect(try store.fetch(Card.self, id: "c-2") == nil, "the fresh sync did not deliver it: gone")
            #expect(try store.fetch(Card.self, id: "c-1") != nil)
            #expect(try store.fetch(Card.self, id: "c-3")?.title == "Moved on")
            #expect(try store.subscriptionRowIDs(id: mine.id) == ["Card": ["c-1"]])
            #expect(try mine.status?.hasSynced == true)
        }
    }

    @Test("subscriptions are pulled by tier with the scopes, and a subscription's progress shows while its pages come")
    func orderAndProgress() async throws {
        try await LiveServer.engine { server in
            for index in 0..<7 { try await Self.card(server, "c-\(index)", assignee: "u-1") }
            try await Self.card(server, "c-9")
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            let probe = SubscriptionProbe(server.transport("d-1"))
            // The team scope synced whole too: it holds the critical contract (Card), so the critical
            // subscription has a critical scope to go before.
            let scopes = ["catalog", "team"]
            let engine = Self.engine(store, probe, scopes: scopes)
            let mine = try await engine.subscribe(Subscriptions.assignedCards())
            let one = try await engine.subscribe(Subscriptions.card(id: "c-9"), priority: .low)
            probe.onSubscriptionPull = { request in
                guard request.subscriptions.contains(where: { $0.id == mine.id }) else { return }
                probe.note("progress \((try? mine.status?.progress?.done) ?? -1)")
            }
            #expect(Self.succeeded(await engine.syncNow()))

            // Critical before every scope (`team` holds a critical contract), low after the last one.
            let order = store.priorities.order(scopes)
            #expect(store.priorities.topPriority(of: order[0]) == .critical)
            var expected = [
                "progress -1", "subscriptions assigned_cards", "progress 3", "subscriptions assigned_cards", "progress 6",
                "subscriptions assigned_cards",
            ]
            for scope in order {
                if store.priorities.topPriority(of: scope) == .low, !expected.contains("subscriptions card") {
                    expected.append("subscriptions card")
                }
                expected.append("scope \(scope)")
            }
            if !expected.contains("subscriptions card") { expected.append("subscriptions card") }
            #expect(probe.log == expected)
            #expect(try mine.status?.progress == nil, "no pages coming now")
            #expect(try mine.status?.rowCount == 7 && one.status?.rowCount == 1)
        }
    }

    @Test("more subscriptions than one request carries are pulled in several, fewer when the server takes fewer")
    func manySubscriptions() async throws {
        try await LiveServer.engine { server in
            for index in 0..<70 { try await Self.card(server, "c-\(index)") }
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            let probe = SubscriptionProbe(server.transport("d-1"))
            let engine = Self.engine(store, probe)
            var handles: [SubscriptionHandle] = []
            for index in 0..<70 { handles.append(try await engine.subscribe(Subscriptions.card(id: "c-\(index)"))) }
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.count(Card.self) == 70)
            #expect(try handles.allSatisfy { try $0.status?.hasSynced == true })
            #expect(probe.requestSizes.count >= 2 && probe.requestSizes.allSatisfy { $0 <= 64 }, "\(probe.requestSizes)")
            #expect(await engine.currentStatus.subscriptions.active == 70)
        }

        var configuration = ServerConfiguration(port: 0, rateLimit: nil)
        configuration.identityLimits.subscriptionsPerDevice = 8
        try await LiveServer.engine(configuration: configuration) { server in
            for index in 0..<20 { try await Self.card(server, "c-\(index)") }
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            let probe = SubscriptionProbe(server.transport("d-1"))
            let engine = Self.engine(store, probe)
            for index in 0..<20 { _ = try await engine.subscribe(Subscriptions.card(id: "c-\(index)")) }
            #expect(Self.succeeded(await engine.syncNow()))
            #expect(try store.count(Card.self) == 20)
            #expect(probe.requestSizes == [20, 8, 8, 4], "refused whole at 20, then the server's limit")
        }
    }

    @Test("a transport that cannot pull subscriptions leaves them unsynced and the scopes sync all the same")
    func unsupportedTransport() async throws {
        try await LiveServer.engine { server in
            let directory = try TemporaryDirectory()
            let store = try makeEngineDeviceStore(directory, device: "d-1")
            let engine = Self.engine(store, NoSubscriptionTransport(server.transport("d-1")))
            let card = try await engine.subscribe(Subscriptions.card(id: "c-1"))
            #expect(Self.succeeded(await engine.syncNow()))
            let status = try #require(try card.status)
            #expect(!status.hasSynced && status.isActive && status.error == nil)
            #expect(status.lastFailure == TransportError.subscriptionsUnsupported.detail)
            await #expect(throws: SubscriptionError.unsupported(message: TransportError.subscriptionsUnsupported.detail.message)) {
                try await card.waitForFirstSync()
            }
            #expect(try card.status?.isActive == true, "kept: it syncs once the transport can")
            #expect(await engine.currentStatus.subscriptions.awaitingFirstSync == 1)
        }
    }
}

/// Forwards to a real transport, noting every subscription pull (its entries, its size) and
/// every unfiltered scope pull in one log, in order.
final class SubscriptionProbe: SyncTransport, @unchecked Sendable {
    let inner: any SyncTransport
    private let lock = NSLock()
    private var notes: [String] = []
    private var sent: [SubscriptionPullRequest.Entry] = []
    private var sizes: [Int] = []
    private var hook: (@Sendable (SubscriptionPullRequest) -> Void)?

    init(_ inner: any SyncTransport) { self.inner = inner }

    var log: [String] { lock.withLock { notes } }
    var entries: [SubscriptionPullRequest.Entry] { lock.withLock { sent } }
    var requestSizes: [Int] { lock.withLock { sizes } }
    /// Called with each subscription pull before it is sent.
    var onSubscriptionPull: (@Sendable (SubscriptionPullRequest) -> Void)? {
        get { lock.withLock { hook } }
        set { lock.withLock { hook = newValue } }
    }

    func note(_ line: String) { lock.withLock { notes.append(line) } }

    func clear() { lock.withLock { (notes, sent, sizes) = ([], [], []) } }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse { try await inner.push(request) }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        try await pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: nil)
    }

    func pull(
        scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String, contracts: [String]?
    ) async throws(TransportError) -> Data {
        if contracts == nil, log.last != "scope \(scope)" { note("scope \(scope)") }
        return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID, contracts: contracts)
    }

    var filtersPullsByContract: Bool { inner.filtersPullsByContract }

    func pullSubscriptions(
        _ request: SubscriptionPullRequest, schema: [String: Int], clientID: String
    ) async throws(TransportError) -> SubscriptionPullResponse {
        onSubscriptionPull?(request)
        lock.withLock {
            notes.append("subscriptions " + Set(request.subscriptions.map(\.name)).sorted().joined(separator: ","))
            sent += request.subscriptions
            sizes.append(request.subscriptions.count)
        }
        return try await inner.pullSubscriptions(request, schema: schema, clientID: clientID)
    }

    func health() async -> Bool { await inner.health() }
}

/// A transport without subscription pulls (the protocol's default): scopes only, or nothing at all.
struct NoSubscriptionTransport: SyncTransport {
    var inner: (any SyncTransport)?

    init(_ inner: (any SyncTransport)? = nil) { self.inner = inner }

    func push(_ request: PushRequest) async throws(TransportError) -> PushResponse {
        guard let inner else { throw .network("no server") }
        return try await inner.push(request)
    }

    func pull(scope: String, cursor: String?, limit: Int?, schema: [String: Int], clientID: String) async throws(TransportError) -> Data {
        guard let inner else { throw .network("no server") }
        return try await inner.pull(scope: scope, cursor: cursor, limit: limit, schema: schema, clientID: clientID)
    }

    func health() async -> Bool { await inner?.health() ?? false }
}
