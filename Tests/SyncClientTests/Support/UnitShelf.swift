import Foundation
import LearningClient
import SyncClient

/// Units to download, as the downloader finds them now: published on a live server (the unit,
/// one lesson, its `Asset` rows, which the contracts' `unit` subscription brings through the
/// engine), with the same bytes served from memory by ``files`` for quick range downloads.
struct UnitShelf: Sendable {
    let server: LiveServer
    /// Serves the files of the units added, as the server does.
    let files: InMemoryAssetTransport

    /// A shelf on `server` whose in-memory transport writes range bodies in `folder`.
    init(_ server: LiveServer, bodies folder: URL) {
        self.server = server
        files = InMemoryAssetTransport(folder: folder)
    }

    /// Publishes a unit of one lesson (`<unit>-lesson-0`) with one file per entry of
    /// `fileSizes` (`<unit>-file-<n>`, `sampleBytes(size, seed: n)`), on the server and in
    /// ``files``.
    func addUnit(_ id: String, fileSizes: [Int]) async throws {
        let unitFiles = fileSizes.enumerated().map { index, size in (id: "\(id)-file-\(index)", data: sampleBytes(size, seed: index)) }
        try await server.publishUnit(id, lessons: [unitFiles])
        for file in unitFiles { files.add(file.id, file.data) }
    }
}

extension LiveServer {
    /// An engine for a device's store (user `u-1`, the store's device) that syncs the user
    /// scope only: units reach it through their subscriptions alone. It does not retry by
    /// itself; a subscription's first sync retries on its own.
    func engine(_ store: OfflineStore, pullPageSize: Int? = nil) -> SyncEngine {
        SyncEngine(
            store: store, transport: transport(store.configuration.deviceId ?? "device-1"),
            configuration: SyncEngineConfiguration(scopes: ["user"], pullPageSize: pullPageSize, retriesAutomatically: false))
    }
}

/// An engine whose server cannot be reached (nothing listens on port 1: connections are
/// refused, as with no network), for a downloader that only resolves files already described
/// on the device; `sleeper` is what a subscription's first sync waits on between attempts.
func unreachableEngine(_ store: OfflineStore, sleeper: any Sleeper = TaskSleeper()) -> SyncEngine {
    SyncEngine(
        store: store, transport: unreachableTransport(),
        configuration: SyncEngineConfiguration(scopes: ["user"], retriesAutomatically: false, sleeper: sleeper))
}

/// A transport to a server that cannot be reached (port 1).
func unreachableTransport() -> URLSessionTransport {
    URLSessionTransport(baseURL: URL(string: "http://127.0.0.1:1")!, timeout: 5) { "token" }
}
