import ContractRuntime
import Contracts
package import Foundation
import LearningClient
import SyncClient
import SyncProtocol

/// The device store pull pages are decoded against (rows are only prepared, never stored):
/// opened once per process in a folder of its own under the temporary directory, removed
/// when the process exits.
private let pullPageStore: OfflineStore = {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-fuzz-\(UUID().uuidString)")
    do {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let store = try OfflineStore(
            OfflineStoreConfiguration(
                databaseURL: folder.appendingPathComponent("device.sqlite"), tenantId: "acme", userId: "u-1", deviceId: "d-1",
                keyProvider: InMemoryKeyProvider()
            ), contracts: ContractRegistry.self, extensions: [LearningStore()]
        )
        storeFolder = folder.path
        atexit {
            if let folder = storeFolder { try? FileManager.default.removeItem(atPath: folder) }
        }
        return store
    } catch {
        fatalError("cannot open the device store the pull page target decodes with: \(error)")
    }
}()

/// Where ``pullPageStore`` lives, for its removal at exit; written once, before it is read.
nonisolated(unsafe) private var storeFolder: String?

/// A pull page body as a device reads it: ``PullPageDecoder/peek(_:)`` for the next page's
/// cursor, then ``PullPageDecoder/decode(_:scopeKey:store:)`` into prepared rows (not stored).
/// Properties: nothing traps; the decoder refuses exactly what ``PullResponse/init(json:)``
/// refuses and reads the same cursor and `has_more`; a page it reads is peeked with the
/// cursor and `has_more` it reads.
package func fuzzPullPage(_ data: Data) throws(PropertyViolation) {
    let peeked = PullPageDecoder.peek(data)
    let decoded: (cursor: String, hasMore: Bool)?
    do {
        let page = try PullPageDecoder.decode(data, scopeKey: "progress:user:u-1", store: pullPageStore)
        decoded = (page.cursor, page.hasMore)
    } catch {
        decoded = nil
    }
    let response: PullResponse?
    do {
        response = try PullResponse(json: data)
    } catch {
        response = nil
    }
    switch (decoded, response) {
    case (nil, nil):
        return
    case (let decoded?, nil):
        throw PropertyViolation("PullPageDecoder reads a page (cursor \(decoded.cursor)) that PullResponse(json:) refuses")
    case (nil, let response?):
        throw PropertyViolation("PullPageDecoder refuses a page PullResponse(json:) reads (cursor \(response.cursor))")
    case (let decoded?, let response?):
        try check(
            decoded.cursor == response.cursor && decoded.hasMore == response.hasMore,
            "PullPageDecoder reads cursor \(decoded.cursor), has_more \(decoded.hasMore); PullResponse(json:) \(response.cursor), \(response.hasMore)"
        )
        guard let peeked else {
            throw PropertyViolation("peek finds no cursor in a page that decodes (cursor \(decoded.cursor))")
        }
        try check(
            peeked.cursor == decoded.cursor && peeked.hasMore == decoded.hasMore,
            "peek reads cursor \(peeked.cursor), has_more \(peeked.hasMore); decode \(decoded.cursor), \(decoded.hasMore)"
        )
    }
}
