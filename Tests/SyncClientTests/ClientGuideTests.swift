import ContractRuntime
import Contracts
import Foundation
import GRDB
import LearningClient
import OutpostTestSupport
import SyncClient
import SyncProtocol
import Testing

/// The code of `docs/client.md`. Every `// snippet: NAME` … `// end snippet` region below is
/// copied verbatim into the guide under `<!-- snippet: NAME -->`; ``guideMatchesTheseTests()``
/// fails when the two differ, so the guide's examples are always code that ran.
@Suite(.blockingWork) struct ClientGuideTests {
    @Test func anAppsDayOffline() async throws {
        try await LiveServer.run { server in
            let folder = try TemporaryDirectory()
            let serverURL = server.url
            let deviceToken = server.token("phone-1")
            // Held until the end: the folder is deleted when it is released, under the open store.
            let otherDeviceFolder = try TemporaryDirectory()
            defer { withExtendedLifetime(otherDeviceFolder) {} }
            let otherDevice = try makeDeviceStore(otherDeviceFolder, device: "tablet-1")
            let otherEngine = SyncEngine(store: otherDevice, transport: server.transport("tablet-1"), configuration: .init(scopes: ["team"]))
            // The team's task list, made on another device.
            try otherDevice.create(FieldTask(id: "task-1", teamId: "team-1", title: "Inspect pump 7", taskKind: .inspection, revision: 0))
            guard case .succeeded = await otherEngine.syncNow() else { Issue.record("tablet sync"); return }

            // snippet: open
            let store = try OfflineStore(
                OfflineStoreConfiguration(
                    databaseURL: folder.url.appendingPathComponent("outpost.sqlite"),
                    tenantId: "acme", userId: "u-1", deviceId: "phone-1",
                    // KeychainKeyProvider() on Apple platforms.
                    keyProvider: FileKeyProvider(directory: folder.url.appendingPathComponent("keys"))
                ),
                contracts: ContractRegistry.self,
                // The learning app's tables: its unit cache, downloads and assessments.
                extensions: [LearningStore()]
            )
            // end snippet

            // snippet: engine
            let transport = URLSessionTransport(baseURL: serverURL) { deviceToken }
            let engine = SyncEngine(
                store: store, transport: transport,
                configuration: SyncEngineConfiguration(scopes: ["user", "team", "content"])
            )
            // Syncs when the server becomes reachable and every 15 minutes while it is.
            await engine.start(connectivity: SystemConnectivityMonitor.make(transport: transport))
            // end snippet
            defer { Task { await engine.stop() } }

            // snippet: status
            let statusUpdates = Task { () -> SyncStatus? in
                for await status in await engine.status {
                    // Drive the UI: status.connectivity, status.phase, status.progress,
                    // status.pending / failed / conflicts, status.freshness["team"], ...
                    if status.pending == 0, status.lastSuccess != nil { return status }
                }
                return nil
            }
            // end snippet

            // snippet: write
            try store.create(
                Incident(
                    id: "inc-7", teamId: "team-1", number: "INC-7", shortDescription: "Pump 7 leaking", state: .new,
                    priority: .high, openedAt: Timestamp(Date()), updatedAt: Timestamp(Date())
                )
            )
            try store.patch(Incident.self, id: "inc-7", [.state(.inProgress), .assigneeId("u-1")])
            try store.record(TaskStarted(teamId: "team-1", taskId: "task-1"))
            // end snippet

            // snippet: read
            let urgent = try store.all(
                Incident.self, where: .equals(.teamId("team-1")) && .oneOf([.priority(.critical), .priority(.high)]),
                orderBy: [.descending("opened_at")]
            )
            // end snippet
            #expect(urgent.map(\.id) == ["inc-7"])

            // snippet: sync
            switch await engine.syncNow() {
            case .succeeded(let pushed, let pulled):
                print("pushed \(pushed), pulled \(pulled)")
            case .failed(let error, let retryAt):
                print("not synced (\(error.detail.message)); next attempt \(retryAt.map { "\($0)" } ?? "when triggered")")
            case .storeFailed(let reason):
                print("the local store failed: \(reason)")
            }
            // end snippet
            let synced = try #require(await statusUpdates.value)
            let refused = try store.outboxEntries(statuses: [.failed]).map { "\($0.entity): \($0.lastError?.message ?? "")" }
            #expect(synced.failed == 0, "\(refused)")
            #expect(synced.lastError == nil)

            // The tablet changes the incident's state meanwhile; the phone's change of the same field is later.
            guard case .succeeded = await otherEngine.syncNow() else { Issue.record("tablet sync"); return }
            try otherDevice.patch(Incident.self, id: "inc-7", [.state(.onHold)])
            try store.patch(Incident.self, id: "inc-7", [.priority(.critical)])

            // snippet: observe
            let teamIncidents = store.observeAll(Incident.self, where: .equals(.teamId("team-1")))
            for try await incidents in teamIncidents {
                // Yields the cached rows at once, then again after every change (a sync included).
                if incidents.contains(where: { $0.state == .onHold && $0.priority == .critical }) { break }
                await engine.syncNow()
                await otherEngine.syncNow()
            }
            // end snippet

            // snippet: conflicts
            for conflict in try store.conflicts() {
                // conflict.localRow and conflict.serverRow hold both versions for the UI.
                try store.resolveConflict(conflict.id, with: .keepMine)  // or .takeTheirs, or resolveConflict(_:merged:)
            }
            for entry in try store.outboxEntries(statuses: [.failed]) {
                // Refused by the server for good (entry.lastError says why): retry or give up.
                try store.discardFailed(seq: entry.seq)  // or retryFailed(seq:)
            }
            // end snippet

            try await server.storeIncident("inc-1", title: "Pump 7 leaks")
            // snippet: subscribe
            // Just the rows a screen needs: one incident and the asset it names, whatever the team holds.
            let incident = try await engine.subscribe(Subscriptions.incident(id: "inc-1"))
            try await incident.waitForFirstSync()
            let opened = try store.fetch(Incident.self, id: "inc-1")
            print("\(opened?.shortDescription ?? ""): \(try incident.status?.rowCount ?? 0) rows")
            // Done with it: its rows stay readable for its TTL (the contract's, 7 days), then go
            // unless another subscription, a scope synced whole or an unsynced write holds them.
            try await incident.unsubscribe()
            // end snippet
            #expect(opened?.shortDescription == "Pump 7 leaks")

            // snippet: update-required
            for requirement in await engine.currentStatus.updateRequired {
                print("update the app to keep syncing \(requirement.entity ?? "data")")
            }
            // end snippet

            await engine.stop()
            // snippet: sign-out
            do {
                try store.signOut()
            } catch OfflineStoreError.pendingWrites(let count) {
                print("\(count) changes are not on the server yet; sync first or sign out with force: true")
            }
            // end snippet
            #expect(!FileManager.default.fileExists(atPath: folder.url.appendingPathComponent("outpost.sqlite").path))
        }
    }

    @Test func aLearnerTakesAUnitOffline() async throws {
        try await LiveServer.run { server in
            let folder = try TemporaryDirectory()
            let store = try makeDeviceStore(folder, device: "phone-1")
            let transport = server.transport("phone-1")
            let audio = sampleBytes(300_000)
            try await server.publishUnit("unit-1", lessons: [[("asset-1", audio)], [("asset-2", sampleBytes(1_000, seed: 2))]])

            let engine = SyncEngine(store: store, transport: transport, configuration: .init(scopes: ["user"]))
            // snippet: download
            // The unit, its lessons and their assets come through its `unit` subscription; then its files.
            for try await progress in engine.downloadUnit(id: "unit-1") {
                print("\(progress.filesDone)/\(progress.filesTotal) files, \(Int(progress.fraction * 100)) %")
            }
            // end snippet

            let unreachable = URLSessionTransport(baseURL: URL(string: "http://127.0.0.1:1")!) { "" }
            let offline = SyncEngine(store: store, transport: unreachable, configuration: .init(scopes: ["user"]))
            var played: URL?
            try store.markUnitOpened(id: "unit-1")
            // snippet: resolve
            do {
                // A file:// URL: at once when the device holds the file, else downloaded and checked.
                let file = try await offline.assetFile(id: "asset-1")
                played = file
            } catch AssetError.notAvailableOffline {
                print("not available offline")
            }
            // end snippet
            #expect(try Data(contentsOf: try #require(played)) == audio)

            // snippet: cache
            for unit in try store.cachedUnits() {
                print("\(unit.title ?? unit.id): \(unit.status), \(unit.bytesOnDisk) bytes, opened \(unit.lastOpenedAt.map { "\($0)" } ?? "never")")
            }
            let totals = try store.cacheTotals()
            print("\(totals.downloadedUnits) units, \(totals.bytesOnDisk) bytes of files")
            try store.markUnitCompleted(id: "unit-1")  // kept a week more, then evicted unless opened again
            try store.deleteCachedUnit(id: "unit-1")  // its subscription and rows; clearCache() removes every unit
            // end snippet
            #expect(totals.downloadedUnits == 1)
            #expect(totals.bytesOnDisk == Int64(audio.count + 1_000))
            #expect(try store.subscriptions().isEmpty)
            #expect(try store.cachedUnits().isEmpty)
        }
    }

    @Test func aLearnerSubmitsAfterTheAssessmentChanged() async throws {
        try await LiveServer.run { server in
            try await server.publishQuiz("quiz-1", key: ["q1": "a"])
            try await server.publishQuiz("quiz-2", key: ["q1": "a"])
            // Held until the end: the folder is deleted when it is released, under the open store.
            let storeFolder = try TemporaryDirectory()
            defer { withExtendedLifetime(storeFolder) {} }
            let store = try makeDeviceStore(storeFolder, device: "phone-1")
            let engine = SyncEngine(store: store, transport: server.transport("phone-1"), configuration: .init(scopes: ["user", "content"]))
            guard case .succeeded = await engine.syncNow() else { Issue.record("first sync"); return }

            // snippet: assessment-start
            if let quiz = try store.assessmentAvailability(id: "quiz-1") {
                // Shown before the learner starts; the server refuses what comes too late.
                print(
                    "revision \(quiz.revision), open: \(quiz.isOpen), last day \(quiz.availableUntil.map { "\($0)" } ?? "none"), "
                        + "time limit \(quiz.timeLimitSeconds.map { "\($0) s" } ?? "none")")
            }
            let attempt = try store.startAttempt(assessmentId: "quiz-1")  // taken on the revision shown
            try store.answer(attemptId: attempt.attemptId, questionId: "q1", answer: .string("a"))
            try store.submitAttempt(attemptId: attempt.attemptId)  // queued; the server grades it
            // end snippet
            #expect(attempt.assessmentRevision == 1)

            // Another attempt, at quiz-2; then the editor publishes quiz-1's revision 2 and deletes quiz-2.
            let other = try store.startAttempt(assessmentId: "quiz-2")
            try store.answer(attemptId: other.attemptId, questionId: "q1", answer: .string("a"))
            try store.submitAttempt(attemptId: other.attemptId)
            try await server.publishQuiz("quiz-1", key: ["q1": "b"])
            try await server.content.delete(entity: "Assessment", id: "quiz-2", identity: LiveServer.admin)
            guard case .succeeded = await engine.syncNow() else { Issue.record("sync"); return }
            // The app's question to the learner: submit anyway or retake.
            let askLearner: (AttemptConflict) -> AttemptConflictChoice = { _ in .submitAnyway }
            var kept: [Data] = []

            // snippet: assessment-conflict
            for conflict in try store.attemptConflicts() {
                switch conflict.kind {
                case .newRevision(let current):
                    // Taken on conflict.takenRevision, now at current.revision: the learner chooses.
                    print("\(conflict.assessmentTitle ?? conflict.assessmentId) changed to revision \(current.revision)")
                    try store.resolveAttemptConflict(conflict.id, with: askLearner(conflict))  // .submitAnyway or .retake
                case .assessmentDeleted:
                    kept.append(conflict.exportedAnswers())  // JSON the learner keeps, then the attempt goes
                    try store.resolveAttemptConflict(conflict.id, with: .discard)
                }
            }
            // end snippet

            #expect(kept.count == 1)
            guard case .succeeded = await engine.syncNow() else { Issue.record("last sync"); return }
            let graded = try #require(try store.fetch(Attempt.self, id: attempt.attemptId))
            #expect(graded.outcome == .passed)
            #expect(graded.assessmentRevision == 1)
            #expect(try store.attemptConflicts().isEmpty)
        }
    }

    /// The guide's code blocks are the snippets above, character for character.
    @Test func aDevicesDataStaysWithinWhatTheUserAllows() async throws {
        try await LiveServer.run { server in
            let folder = try TemporaryDirectory()
            let clock = ManualClock(Date())
            let store = try makeDeviceStore(folder, device: "phone-1", clock: clock)
            let transport = server.transport("phone-1")
            let engine = SyncEngine(store: store, transport: transport, configuration: .init(scopes: ["team"]))
            try store.create(
                ServiceAsset(
                    id: "scooter-12", teamId: "team-1", assetTag: "S-12", displayName: "Scooter 12", category: .vehicle, updatedAt: Timestamp(Date()))
            )
            try store.create(
                ServiceAsset(
                    id: "scooter-13", teamId: "team-1", assetTag: "S-13", displayName: "Scooter 13", category: .vehicle, updatedAt: Timestamp(Date()))
            )

            // snippet: preferences
            // A settings screen: Wi-Fi only, 20 MB a day for automatic syncs, every hour.
            try await engine.setPreferences(
                SyncPreferences(allowsExpensiveNetwork: false, dailyAutomaticDataBudget: 20_000_000, syncInterval: 3_600)
            )
            if let pause = await engine.currentStatus.automaticSyncsPaused {
                print("automatic syncs wait: \(pause)")  // .expensiveNetwork, .dataBudgetUsed(used:budget:)
            }
            print("today: \(try store.automaticDataUsage().bytes) bytes")
            // end snippet
            #expect(await engine.syncPreferences.syncInterval == 3_600)

            // snippet: download-order
            let firstSync = Task {
                for await status in await engine.status {
                    // On a first download, critical contracts are usable before low ones arrive.
                    if status.availableContracts.contains("Task") { print("tasks are ready") }
                    if status.lastSuccess != nil { break }
                }
            }
            await engine.syncNow()
            // end snippet
            await firstSync.value
            #expect(await engine.currentStatus.availableContracts.isSuperset(of: ["Task", "Incident", "ServiceAsset"]))

            // snippet: retention
            // ServiceAsset keeps synced rows 7 days (`retention: 7d`): keep this one longer.
            try store.pin(ServiceAsset.self, id: "scooter-12")
            // Housekeeping runs when the store opens and after every sync; or now:
            let report = try store.runHousekeeping()
            print("dropped \(report.expiredRows), pruned \(report.prunedOutboxEntries) acknowledged writes")
            // A dropped row comes back when the server changes it, or through a read-through.
            print("dropped and not back yet: \(try store.droppedRows(ServiceAsset.self).keys.sorted())")
            // end snippet
            #expect(report.expiredRows.isEmpty)
            clock.advance(by: 8 * 86_400)
            #expect(try store.runHousekeeping().expiredRows == ["ServiceAsset": 1])
            #expect(try store.fetch(ServiceAsset.self, id: "scooter-12") != nil)
            #expect(Set(try store.droppedRows(ServiceAsset.self).keys) == ["scooter-13"])
        }
    }

    @Test func aDeviceShortOfSpaceRefusesADownloadItCannotHold() async throws {
        try await LiveServer.run { server in
            let folder = try TemporaryDirectory()
            let transport = server.transport("phone-1")
            try await server.publishUnit("unit-1", lessons: [[("asset-1", sampleBytes(300_000))]])
            let volume = StorageGuardTests.FakeFreeSpace(capacity: 400_000)

            // snippet: storage-guard
            var configuration = OfflineStoreConfiguration(
                databaseURL: folder.url.appendingPathComponent("outpost.sqlite"), tenantId: "acme", userId: "u-1",
                keyProvider: FileKeyProvider(directory: folder.url.appendingPathComponent("keys"))
            )
            // The seed's 50 assessments of 10 MB at most are the default; the app adds its own.
            configuration.storageLimits.contracts["Incident"] = ContractStorageLimit(maxRows: 1_000)
            configuration.storageLimits.minimumFreeBytes = 200_000_000
            // end snippet
            configuration.storageLimits.minimumFreeBytes = 0
            configuration.freeSpace = volume
            let store = try OfflineStore(configuration, contracts: ContractRegistry.self, extensions: [LearningStore()])
            let engine = SyncEngine(store: store, transport: transport, configuration: .init(scopes: ["user"]))

            // snippet: insufficient-space
            do {
                for try await progress in engine.downloadUnit(id: "unit-1") { print(progress.fraction) }
            } catch AssetError.insufficientSpace(_, let needed, let available) {
                // Twice the file's size must be free, after the engine evicted what it may of its cache.
                print("free \(needed - available) more bytes to download this unit")
            }
            // end snippet
            #expect(try store.cacheTotals().bytesOnDisk == 0)
            volume.capacity = 1_000_000
            for try await _ in engine.downloadUnit(id: "unit-1") {}
            #expect(try store.cacheTotals().downloadedUnits == 1)
        }
    }

    @Test func anAppKeepsItsOwnTableBesideItsRows() throws {
        let folder = try TemporaryDirectory()
        let configuration = OfflineStoreConfiguration(
            databaseURL: folder.url.appendingPathComponent("outpost.sqlite"), tenantId: "acme", userId: "u-1",
            keyProvider: FileKeyProvider(directory: folder.url.appendingPathComponent("keys"))
        )
        // snippet: store-extension
        struct Bookmarks: StoreExtension {
            var name: String { "bookmarks" }
            var migrations: [StoreMigration] {
                [StoreMigration("bookmarks.v1", [#"CREATE TABLE "bookmarks" ("row_id" TEXT PRIMARY KEY NOT NULL, "at" INTEGER NOT NULL)"#])]
            }
            var tables: [String] { ["bookmarks"] }
        }
        let store = try OfflineStore(configuration, contracts: ContractRegistry.self, extensions: [Bookmarks()])
        // end snippet
        // snippet: transaction
        try store.transaction { transaction throws(OfflineStoreError) in
            try transaction.create(FieldTask(id: "task-9", teamId: "team-1", title: "Inspect pump 9", taskKind: .inspection, revision: 0))
            try transaction.withDatabase { db in
                try db.execute(sql: #"INSERT INTO "bookmarks" ("row_id", "at") VALUES (?, ?)"#, arguments: ["task-9", transaction.now])
            }
        }
        // end snippet
        let bookmarked = try store.read { reader throws(OfflineStoreError) in
            try reader.withDatabase { db in try String.fetchAll(db, sql: #"SELECT "row_id" FROM "bookmarks""#) }
        }
        #expect(bookmarked == ["task-9"])
        #expect(try store.outboxCounts().unsent == 1)
        try store.close()
    }

    @Test
    func aReceiptWithItsFiles() async throws {
        try await LiveServer.run(contracts: FileContracts.self, apps: []) { server in
            let phone = try FileTestStore(clock: ManualClock(Date()))
            let store = phone.store
            let engine = SyncEngine(store: store, transport: server.transport("phone-1"), configuration: .init(scopes: ["user"]))
            let pickedPhoto = phone.directory.url.appendingPathComponent("IMG_0042.jpg")
            try typed(sampleBytes(900, seed: 8), as: "image/jpeg").write(to: pickedPhoto)
            let scannedPDF = phone.directory.url.appendingPathComponent("scan.pdf")
            try typed(sampleBytes(500, seed: 9), as: "application/pdf").write(to: scannedPDF)

            // snippet: files-attach
            // Copied into the store's files folder and hashed as it is copied (in chunks).
            let photo = try store.importFile(
                at: pickedPhoto, contentType: "image/jpeg", name: "receipt.jpg", for: FileField(contract: "Receipt", field: "photo"))
            // The row, and the file's record, in one transaction: both are kept, or neither.
            try store.create(Receipt(id: "r-1", title: "Taxi to the airport", photo: photo))
            // The next sync uploads the photo (resuming where a lost connection left it), then pushes the row.
            await engine.syncNow()
            // end snippet
            #expect(try store.storedFile(sha256: photo.sha256)?.state == .uploaded)

            var refused: FileError?
            // snippet: files-refused
            do {
                let scan = try store.importFile(at: scannedPDF, contentType: "application/pdf", name: "scan.pdf")
                try store.create(Receipt(id: "r-2", title: "Hotel", photo: scan))
            } catch OfflineStoreError.file(let refusal) {
                // Receipt.photo: files of type application/pdf are not accepted (only image/*)
                print(refusal)
                refused = refusal
            }
            // end snippet
            #expect(refused == .contentTypeNotAllowed(contract: "Receipt", field: "photo", contentType: "application/pdf", allowed: ["image/*"]))
            #expect(try store.fetch(Receipt.self, id: "r-2") == nil)

            let tablet = try FileTestStore(clock: ManualClock(Date()))
            let tabletEngine = SyncEngine(store: tablet.store, transport: server.transport("tablet-1"), configuration: .init(scopes: ["user"]))
            await tabletEngine.syncNow()
            let receipts = try tablet.store.all(Receipt.self)
            var shown: URL?
            // snippet: files-read
            for receipt in receipts {
                guard let photo = receipt.photo else { continue }
                // A file:// URL: at once when the device holds the file, else downloaded (resumed
                // after a cut), checked against its SHA-256, then cached.
                let url = try await tabletEngine.file(for: photo)
                shown = url
            }
            // end snippet
            #expect(try Data(contentsOf: try #require(shown)) == typed(sampleBytes(900, seed: 8), as: "image/jpeg"))

            // snippet: files-cache
            // What the files folder holds, least recently used first.
            for file in try tablet.store.storedFiles() {
                print("\(file.reference.name ?? file.reference.sha256): \(file.state), \(file.reference.byteCount) bytes, used \(file.lastUsedAt)")
            }
            // Housekeeping keeps the cache within StorageLimits.fileCacheBytes (500 MB unless set); at once:
            let evicted = try tablet.store.enforceFileCacheBudget()
            // end snippet
            #expect(evicted.isEmpty)
        }
    }

    @Test func aFieldOperativesShiftGoesUpCompressed() async throws {
        try await LiveServer.run { server in
            let folder = try TemporaryDirectory()
            let store = try makeDeviceStore(folder, device: "tablet-1")
            let serverURL = server.url
            let deviceToken = server.token("tablet-1")
            for index in 0..<30 {
                try store.create(
                    FieldTask(
                        id: "task-\(index)", teamId: "team-1", title: "Replace the battery of pump station \(index)", taskKind: .batterySwap,
                        revision: 0))
            }
            // snippet: compressed-pushes
            // Push bodies from 1 KiB go gzip-compressed (1 KiB is the default; nil sends every push as is).
            let transport = URLSessionTransport(baseURL: serverURL, compressPushesFrom: 1024) { deviceToken }
            let engine = SyncEngine(store: store, transport: transport, configuration: SyncEngineConfiguration(scopes: ["team"]))
            let result = await engine.syncNow()
            if !transport.compressesPushes {
                // The server (or a proxy before it) refused a compressed push with 415: that push
                // went again as is, and so do this transport's next ones.
            }
            // end snippet
            guard case .succeeded(pushed: 30, _) = result else {
                Issue.record("the sync: \(result)")
                return
            }
            #expect(transport.compressesPushes)
            try store.close()
        }
    }

    @Test func aPhonesBackgroundWindowsAndPower() async throws {
        try await LiveServer.run { server in
            let folder = try TemporaryDirectory()
            let store = try makeDeviceStore(folder, device: "phone-1")
            let engine = SyncEngine(store: store, transport: server.transport("phone-1"), configuration: .init(scopes: ["team"]))
            try store.create(FieldTask(id: "task-w", teamId: "team-1", title: "Check the gate", taskKind: .inspection, revision: 0))

            // snippet: background-window
            // The OS gave the app a window (a BGAppRefreshTask: about 30 s); the sync stops before its end.
            let report = await engine.syncInBackgroundWindow(until: Date().addingTimeInterval(25))
            if !report.finished {
                print("left for the next window: \(report.remainingWrites) writes, scopes \(report.scopesLeftToPull)")
            }
            // end snippet
            #expect(report.finished)
            #expect(report.pushed == 1 && report.remainingWrites == 0)

            // snippet: power
            // A battery saver on a platform without Apple's Low Power Mode; hourly, daily when saving power.
            try await engine.setPreferences(
                SyncPreferences(syncInterval: SyncInterval.hourly, lowPowerMode: true, lowPowerSyncInterval: SyncInterval.daily)
            )
            if case .lowPowerMode(let next)? = await engine.currentStatus.deferred {
                print("saving power: the next sync at \(String(describing: next))")
            }
            // end snippet
            #expect(await engine.isLowPowerMode)
            #expect(await engine.syncPreferences.effectiveSyncInterval(lowPowerMode: true) == SyncInterval.daily)
        }
    }

    @Test func guideMatchesTheseTests() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let guide = try String(contentsOf: root.appendingPathComponent("docs/client.md"), encoding: .utf8)
        let tests = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let snippets = Self.snippets(in: tests)
        #expect(snippets.count >= 12)
        let blocks = Self.guideBlocks(in: guide)
        #expect(Set(blocks.keys) == Set(snippets.keys), "docs/client.md must show every snippet of ClientGuideTests, and only those")
        for (name, code) in snippets {
            #expect(blocks[name] == code, "docs/client.md's '\(name)' block differs from ClientGuideTests.swift")
        }
    }

    /// `// snippet: NAME` regions, dedented.
    static func snippets(in source: String) -> [String: String] {
        var result: [String: String] = [:]
        var current: (name: String, lines: [Substring])?
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("// snippet: ") {
                current = (String(trimmed.dropFirst("// snippet: ".count)), [])
            } else if trimmed == "// end snippet", let finished = current {
                let indent = finished.lines.filter { !$0.allSatisfy(\.isWhitespace) }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
                result[finished.name] = finished.lines.map { String($0.dropFirst(min(indent, $0.count))) }.joined(separator: "\n")
                current = nil
            } else if current != nil {
                current?.lines.append(line)
            }
        }
        return result
    }

    /// The ```swift blocks that follow `<!-- snippet: NAME -->` in the guide.
    static func guideBlocks(in guide: String) -> [String: String] {
        var result: [String: String] = [:]
        let lines = guide.split(separator: "\n", omittingEmptySubsequences: false)
        var index = 0
        while index < lines.count {
            let line = lines[index].trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("<!-- snippet: "), line.hasSuffix(" -->"),
                index + 1 < lines.count, lines[index + 1].trimmingCharacters(in: .whitespaces) == "```swift"
            {
                let name = String(line.dropFirst("<!-- snippet: ".count).dropLast(" -->".count))
                var body: [Substring] = []
                index += 2
                while index < lines.count, lines[index].trimmingCharacters(in: .whitespaces) != "```" {
                    body.append(lines[index])
                    index += 1
                }
                result[name] = body.joined(separator: "\n")
            }
            index += 1
        }
        return result
    }
}
