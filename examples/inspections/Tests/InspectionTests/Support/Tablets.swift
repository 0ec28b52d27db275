import Foundation
import InspectionClient
import SyncClient
import Testing

/// Inspectors' tablets against one running server, each with its own folder (removed with the
/// value), its own manual clock, and syncs only when the test says so.
final class TestTablet: Sendable {
    let folder: URL
    let tablet: InspectionTablet
    let clock: ManualClock

    init(_ server: InspectionServerProcess, user: String, device: String, clock: ManualClock) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("inspection-tablet-\(UUID().uuidString)", isDirectory: true)
        let token = try server.token(user: user, device: device)
        self.clock = clock
        tablet = try InspectionTablet(
            folder: folder, server: try server.url, tenant: InspectionServerProcess.tenant, user: user, device: device,
            crew: InspectionServerProcess.crew, clock: clock, retriesAutomatically: false, token: { token })
    }

    deinit {
        try? tablet.close()
        try? FileManager.default.removeItem(at: folder)
    }

    var store: OfflineStore { tablet.store }
    var engine: SyncEngine { tablet.engine }

    /// Pushes and pulls once; records an issue unless the sync succeeded.
    func sync(sourceLocation: SourceLocation = #_sourceLocation) async {
        let result = await tablet.sync()
        guard case .succeeded = result else {
            Issue.record("sync failed: \(result)", sourceLocation: sourceLocation)
            return
        }
    }
}
