import ContractRuntime
public import Foundation
public import InspectionContracts
public import SyncClient

/// An inspector's tablet: the crew's inspections in a store on a SQLite file of its own, written
/// offline and synced with the server by one engine, on Outpost's public API alone.
///
/// ```swift
/// let tablet = try InspectionTablet(
///     folder: appSupport, server: URL(string: "https://inspections.example.com")!,
///     tenant: "acme", user: "inspector-a", device: "tablet-a", crew: "crew-1", token: { session.token })
/// let inspection = try tablet.startInspection(site: "Pump station 4", checklist: ["Exits clear", "Guard rails fixed"])
/// try tablet.check(item: inspection.items[1], of: inspection.id, .fail, note: "Top bolt loose")
/// await tablet.sync()
/// ```
public final class InspectionTablet: Sendable {
    /// The tablet's store: every row of the crew's scope, read offline.
    public let store: OfflineStore
    /// The engine that pushes the tablet's writes and pulls the crew's.
    public let engine: SyncEngine
    /// The crew whose inspections this tablet holds.
    public let crew: String
    /// The tablet's clock: the times it stamps and the hybrid clock of its writes.
    public let clock: any DeviceClock

    /// Opens (or creates) the tablet's store in `folder` and an engine syncing the crew's scope
    /// with `server`, authenticating with what `token` answers (asked again when it expires).
    ///
    /// - Parameter retriesAutomatically: whether the engine syncs by itself after writes and
    ///   retries after failures (an app's choice; a test syncs when it says so).
    /// - Throws: ``SyncClient/OfflineStoreError`` when the store cannot be opened.
    public init(
        folder: URL, server: URL, tenant: String, user: String, device: String, crew: String, clock: any DeviceClock = SystemClock(),
        retriesAutomatically: Bool = true, token: @escaping @Sendable () -> String
    ) throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        self.crew = crew
        self.clock = clock
        store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: folder.appendingPathComponent("inspections.sqlite"), tenantId: tenant, userId: user, deviceId: device,
                keyProvider: FileKeyProvider(directory: folder.appendingPathComponent("keys", isDirectory: true)), clock: clock
            ),
            contracts: ContractRegistry.self
        )
        engine = SyncEngine(
            store: store, transport: URLSessionTransport(baseURL: server, timeout: 30, token: token),
            configuration: SyncEngineConfiguration(scopes: ["crew"], retriesAutomatically: retriesAutomatically)
        )
    }

    /// An inspection just started, with the ids of its checklist's items in order.
    public struct StartedInspection: Sendable, Hashable {
        /// The inspection's id.
        public var id: String
        /// Its checklist items' ids, in the order given.
        public var items: [String]
    }

    /// Starts an inspection of `site` with a checklist of `items`, in one transaction: the
    /// inspection and every item are kept, or none.
    public func startInspection(site: String, address: String? = nil, checklist items: [String]) throws -> StartedInspection {
        let id = Self.newID()
        let now = Timestamp(clock.now())
        let itemIDs = items.map { _ in Self.newID() }
        try store.transaction { (transaction) throws(OfflineStoreError) in
            _ = try transaction.create(Inspection(id: id, teamId: crew, siteName: site, siteAddress: address, updatedAt: now))
            for (index, label) in items.enumerated() {
                _ = try transaction.create(
                    ChecklistItem(id: itemIDs[index], teamId: crew, inspectionId: id, label: label, sortIndex: Int64(index + 1), updatedAt: now))
            }
        }
        return StartedInspection(id: id, items: itemIDs)
    }

    /// Records the result of checking an item; the server folds it into the inspection's
    /// progress (`checked_count`, `failed_count`), which the next pull brings back.
    public func check(item: String, of inspection: String, _ result: ItemChecked.Result, note: String? = nil) throws {
        _ = try store.record(ItemChecked(teamId: crew, inspectionId: inspection, itemId: item, result: result, note: note))
    }

    /// Reports a finding on an inspection, with a photo of the defect when there is one. The
    /// photo is copied into the store with the finding, uploaded before the finding is pushed,
    /// and refused here (``SyncClient/OfflineStoreError/file(_:)``) when it is larger or of
    /// another type than the contract allows.
    public func reportFinding(
        on inspection: String, item: String? = nil, title: String, severity: Finding.Severity = .medium, photo: URL? = nil,
        photoType: String = "image/jpeg"
    ) throws -> String {
        let id = Self.newID()
        let reference = try photo.map {
            try store.importFile(
                at: $0, contentType: photoType, name: $0.lastPathComponent, for: FileField(contract: Finding.descriptor.name, field: "photo"))
        }
        _ = try store.create(
            Finding(id: id, teamId: crew, inspectionId: inspection, itemId: item, title: title, severity: severity, photo: reference, revision: 0))
        return id
    }

    /// The photo of a finding as a local file: at once when the tablet holds it, else
    /// downloaded from the server (resumed, checked against its hash); `nil` when it has none.
    public func photo(of finding: Finding) async throws -> URL? {
        guard let photo = finding.photo else { return nil }
        return try await engine.file(for: photo)
    }

    /// The crew's inspections, as the tablet holds them.
    public func inspections() throws -> [Inspection] {
        try store.all(Inspection.self, orderBy: [.ascending("site_name")])
    }

    /// An inspection's checklist, in its order.
    public func checklist(of inspection: String) throws -> [ChecklistItem] {
        try store.all(ChecklistItem.self, where: .equals(.inspectionId(inspection)), orderBy: [.ascending("sort_index")])
    }

    /// An inspection's findings.
    public func findings(of inspection: String) throws -> [Finding] {
        try store.all(Finding.self, where: .equals(.inspectionId(inspection)))
    }

    /// Pushes the tablet's writes and pulls the crew's, once.
    @discardableResult
    public func sync() async -> SyncResult {
        await engine.syncNow()
    }

    /// Closes the store (after the engine has stopped using it).
    public func close() throws {
        try store.close()
    }

    /// A new row id: lowercase, as identifiers must be.
    static func newID() -> String { UUID().uuidString.lowercased() }
}
