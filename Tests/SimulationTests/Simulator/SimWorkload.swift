import ContractRuntime
import Contracts
import Foundation
import SyncClient

/// What the app on a device writes: every entity contract a device may write, under each of
/// their conflict policies (last writer wins, field merge, version check, append only), and the
/// events the server folds into rows. Rows to change are picked among those the device sees.
enum SimWorkload {
    /// Performs the write drawn from `salt` and says what it did (for the trace).
    static func write(_ store: OfflineStore, user: String, salt: UInt64, serial: Int, now: Timestamp) -> String {
        var random = SimRandom(seed: salt)
        do {
            switch random.below(14) {
            case 0, 1: return try createServiceAsset(store, &random, serial: serial, now: now)
            case 2: return try patchServiceAsset(store, &random)
            case 3: return try replaceServiceAsset(store, &random)
            case 4: return try delete(store, &random)
            case 5: return try createIncident(store, &random, serial: serial, now: now)
            case 6: return try patchIncident(store, &random)
            case 7: return try createTask(store, &random, serial: serial)
            case 8, 9: return try patchTask(store, &random)
            case 10: return try writeResponse(store, &random, user: user, serial: serial, now: now)
            case 11: return try recordStatement(store, &random, serial: serial, now: now)
            default: return try recordEvent(store, &random, now: now)
            }
        } catch {
            return "refused: \(error)"
        }
    }

    /// What the app on the device that syncs no team scope writes (``SimSchedule/subscriber``):
    /// patches, replacements and deletes of the incidents and assets its subscriptions hold
    /// (an incident may change its assignee or its asset, and so leave a subscription), its
    /// user's own rows, events; nothing new in the team's scope.
    static func subscriberWrite(_ store: OfflineStore, user: String, salt: UInt64, serial: Int, now: Timestamp) -> String {
        var random = SimRandom(seed: salt)
        do {
            // An incident or asset when it holds one (the other kind when it holds none of the one drawn).
            let incidents = try store.count(Incident.self)
            let assets = try store.count(ServiceAsset.self)
            var kind = random.below(10)
            if kind < 4, incidents == 0, assets > 0 { kind = 4 }
            if (4..<7).contains(kind), assets == 0, incidents > 0 { kind = 0 }
            if kind < 8, incidents + assets == 0 { kind = 8 }
            switch kind {
            case 0..<4: return try patchIncident(store, &random)
            case 4, 5: return try patchServiceAsset(store, &random)
            case 6: return try replaceServiceAsset(store, &random)
            case 7:
                if random.chance(50) {
                    guard let row = random.pick(try store.all(Incident.self)) else { return "no incident to delete" }
                    return describe(try store.delete(Incident.self, id: row.id))
                }
                guard let row = random.pick(try store.all(ServiceAsset.self)) else { return "no asset to delete" }
                return describe(try store.delete(ServiceAsset.self, id: row.id))
            case 8: return try writeResponse(store, &random, user: user, serial: serial, now: now)
            default: return try recordEvent(store, &random, now: now)
            }
        } catch {
            return "refused: \(error)"
        }
    }

    private static let team = SimServer.team

    private static func describe(_ write: QueuedWrite?) -> String {
        guard let write else { return "nothing changed" }
        return "\(write.op.rawValue) \(write.entity) \(write.rowId) (seq \(write.seq))"
    }

    // MARK: Last writer wins

    private static func createServiceAsset(_ store: OfflineStore, _ random: inout SimRandom, serial: Int, now: Timestamp) throws -> String {
        let asset = ServiceAsset(
            id: "sa-\(serial)", teamId: team, assetTag: "TAG-\(serial)", displayName: "Scooter \(serial)",
            category: random.pick(ServiceAsset.Category.allCases) ?? .vehicle, batteryLevel: Double(random.below(101)) / 100,
            updatedAt: now
        )
        return describe(try store.create(asset))
    }

    private static func patchServiceAsset(_ store: OfflineStore, _ random: inout SimRandom) throws -> String {
        guard let asset = random.pick(try store.all(ServiceAsset.self)) else { return "no asset to patch" }
        var changes: [ServiceAsset.Change] = []
        if random.chance(60) { changes.append(.displayName("Scooter \(random.below(1000))")) }
        if random.chance(50) { changes.append(.status(random.pick(ServiceAsset.Status.allCases) ?? .inService)) }
        if random.chance(50) { changes.append(.batteryLevel(random.chance(10) ? nil : Double(random.below(101)) / 100)) }
        if changes.isEmpty { changes.append(.attributes(.object(["note": .string("n\(random.below(100))")]))) }
        return describe(try store.patch(ServiceAsset.self, id: asset.id, changes))
    }

    private static func replaceServiceAsset(_ store: OfflineStore, _ random: inout SimRandom) throws -> String {
        guard var asset = random.pick(try store.all(ServiceAsset.self)) else { return "no asset to replace" }
        asset.displayName = "Replaced \(random.below(1000))"
        asset.serialNumber = "SN-\(random.below(10_000))"
        return describe(try store.update(asset))
    }

    private static func delete(_ store: OfflineStore, _ random: inout SimRandom) throws -> String {
        switch random.below(4) {
        case 0:
            guard let row = random.pick(try store.all(ServiceAsset.self)) else { return "no asset to delete" }
            return describe(try store.delete(ServiceAsset.self, id: row.id))
        case 1:
            guard let row = random.pick(try store.all(Incident.self)) else { return "no incident to delete" }
            return describe(try store.delete(Incident.self, id: row.id))
        case 2:
            guard let row = random.pick(try store.all(FieldTask.self)) else { return "no task to delete" }
            return describe(try store.delete(FieldTask.self, id: row.id))
        default:
            guard let row = random.pick(try store.all(AssessmentResponse.self)) else { return "no response to delete" }
            return describe(try store.delete(AssessmentResponse.self, id: row.contractPrimaryKey))
        }
    }

    // MARK: Field merge

    private static func createIncident(_ store: OfflineStore, _ random: inout SimRandom, serial: Int, now: Timestamp) throws -> String {
        var incident = Incident(
            id: "inc-\(serial)", teamId: team, number: "INC\(serial)", shortDescription: "Pump \(serial) leaking",
            state: .new, priority: random.pick(Incident.Priority.allCases) ?? .moderate,
            reporterNotes: random.chance(50) ? "call back on 555-\(random.below(10_000))" : nil, openedAt: now, updatedAt: now
        )
        // Drawn after the rest (what a salt drew before stays): an assignee, the asset it names
        // (what the `assigned_incidents` and `incident` subscriptions select).
        if random.chance(50) { incident.assigneeId = "u-\(1 + random.below(2))" }
        if random.chance(50), let asset = random.pick(try store.all(ServiceAsset.self)) { incident.serviceAssetId = asset.id }
        return describe(try store.create(incident))
    }

    private static func patchIncident(_ store: OfflineStore, _ random: inout SimRandom) throws -> String {
        guard let incident = random.pick(try store.all(Incident.self)) else { return "no incident to patch" }
        var changes: [Incident.Change] = []
        if random.chance(50) { changes.append(.state(random.pick(Incident.State.allCases) ?? .inProgress)) }
        if random.chance(40) { changes.append(.priority(random.pick(Incident.Priority.allCases) ?? .high)) }
        if random.chance(40) { changes.append(.shortDescription("Pump \(random.below(1000))")) }
        if random.chance(30) { changes.append(.tags((0..<random.below(3)).map { "t\($0 + random.below(5))" })) }
        if changes.isEmpty { changes.append(.assigneeId(random.chance(50) ? nil : "u-\(1 + random.below(2))")) }
        // Drawn after the rest: now and then another asset or another assignee, so the incident
        // leaves a subscription (or its asset does) and another one takes it.
        if random.chance(20) {
            changes.append(.serviceAssetId(random.chance(20) ? nil : random.pick(try store.all(ServiceAsset.self))?.id))
        }
        if random.chance(15), !changes.contains(where: { if case .assigneeId = $0 { true } else { false } }) {
            changes.append(.assigneeId(random.chance(30) ? nil : "u-\(1 + random.below(2))"))
        }
        return describe(try store.patch(Incident.self, id: incident.id, changes))
    }

    // MARK: Version check

    private static func createTask(_ store: OfflineStore, _ random: inout SimRandom, serial: Int) throws -> String {
        let task = FieldTask(
            id: "task-\(serial)", teamId: team, title: "Swap battery \(serial)", taskKind: random.pick(FieldTask.TaskKind.allCases) ?? .repair,
            sortIndex: Int64(random.below(50)), revision: 0
        )
        return describe(try store.create(task))
    }

    private static func patchTask(_ store: OfflineStore, _ random: inout SimRandom) throws -> String {
        guard let task = random.pick(try store.all(FieldTask.self)) else { return "no task to patch" }
        var changes: [FieldTask.Change] = []
        if random.chance(50) { changes.append(.title("Task \(random.below(1000))")) }
        if random.chance(50) { changes.append(.status(random.pick(FieldTask.Status.allCases) ?? .inProgress)) }
        if random.chance(30) { changes.append(.notes("note \(random.below(1000))")) }
        if changes.isEmpty { changes.append(.sortIndex(Int64(random.below(100)))) }
        return describe(try store.patch(FieldTask.self, id: task.id, changes))
    }

    // MARK: The learner's own scope

    private static func writeResponse(
        _ store: OfflineStore, _ random: inout SimRandom, user: String, serial: Int, now: Timestamp
    ) throws -> String {
        if random.chance(50), let response = random.pick(try store.all(AssessmentResponse.self)) {
            return describe(
                try store.patch(
                    AssessmentResponse.self, id: response.contractPrimaryKey,
                    [.answer(.string("choice-\(random.below(4))")), .flaggedForReview(random.chance(30)), .updatedAt(now)]
                )
            )
        }
        let id = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", serial))!
        let response = AssessmentResponse(
            id: id, assessmentId: "asm-1", attemptId: "att-\(user)", questionId: "q-\(serial)", answer: .string("choice-\(random.below(4))"),
            timeSpentMs: Int64(random.below(60_000)), answeredAt: now, updatedAt: now
        )
        return describe(try store.create(response))
    }

    private static func recordStatement(_ store: OfflineStore, _ random: inout SimRandom, serial: Int, now: Timestamp) throws -> String {
        let statement = Statement(
            id: "st-\(serial)", verb: random.pick(Statement.Verb.allCases) ?? .experienced, objectId: "lesson-\(random.below(5))",
            score: random.chance(50) ? Double(random.below(100)) : nil, result: random.chance(30) ? .object(["text": .string("free answer")]) : nil,
            statedAt: now
        )
        return describe(try store.create(statement))
    }

    // MARK: Events

    private static func recordEvent(_ store: OfflineStore, _ random: inout SimRandom, now: Timestamp) throws -> String {
        switch random.below(4) {
        case 0:
            guard let task = random.pick(try store.all(FieldTask.self)) else { return "no task for an event" }
            let to = random.pick(TaskStatusChanged.ToStatus.allCases) ?? .inProgress
            let event = TaskStatusChanged(
                teamId: team, taskId: task.id, fromStatus: TaskStatusChanged.FromStatus(rawValue: task.status.rawValue) ?? .blocked,
                toStatus: to, baseRevision: task.revision
            )
            return "event TaskStatusChanged \(try store.record(event).eventId)"
        case 1:
            guard let asset = random.pick(try store.all(ServiceAsset.self)) else { return "no asset for an event" }
            let event = IssueLogged(
                teamId: team, serviceAssetId: asset.id, category: random.pick(IssueLogged.Category.allCases) ?? .other,
                description: "Issue \(random.below(1000))", observedOn: CalendarDate(year: 2026, month: 3, day: 1 + random.below(28))
            )
            return "event IssueLogged \(try store.record(event).eventId)"
        case 2:
            guard let asset = random.pick(try store.all(ServiceAsset.self)) else { return "no asset for an event" }
            let event = BatterySwapCompleted(
                teamId: team, serviceAssetId: asset.id, removedBatterySerial: "B-\(random.below(100))",
                installedBatterySerial: "B-\(random.below(100))", chargeBefore: 0.1, chargeAfter: Double(50 + random.below(51)) / 100,
                durationSeconds: Int64(60 + random.below(600))
            )
            return "event BatterySwapCompleted \(try store.record(event).eventId)"
        default:
            let lessons = try store.all(Lesson.self)
            let lesson = random.pick(lessons)
            let event = LessonProgressed(
                lessonId: lesson?.id ?? "lesson-missing", unitId: lesson?.unitId ?? "unit-missing",
                sessionId: UUID(uuidString: String(format: "00000000-0000-4000-9000-%012d", random.below(1_000_000)))!,
                progress: Double(random.below(101)) / 100, completed: random.chance(40)
            )
            return "event LessonProgressed \(try store.record(event).eventId)"
        }
    }

    // MARK: Conflicts

    /// Resolves every conflict the device shows: keep mine or take theirs.
    static func resolveConflicts(_ store: OfflineStore, salt: UInt64) -> String {
        var random = SimRandom(seed: salt)
        do {
            let conflicts = try store.conflicts()
            var done: [String] = []
            for conflict in conflicts {
                // An event cannot be sent again as it was: the app discards it.
                let isEvent = ContractRegistry.entity(named: conflict.entity) == nil
                let choice: ConflictChoice = !isEvent && random.chance(50) ? .keepMine : .takeTheirs
                _ = try store.resolveConflict(conflict.id, with: choice)
                done.append("\(conflict.rowId): \(choice == .keepMine ? "keep mine" : "take theirs")")
            }
            return done.isEmpty ? "no conflicts" : "resolved " + done.joined(separator: ", ")
        } catch {
            return "refused: \(error)"
        }
    }
}
