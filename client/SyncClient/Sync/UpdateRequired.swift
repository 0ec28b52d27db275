import Foundation
import SyncProtocol

/// A contract this build is too old for (426): the server no longer accepts or serves this
/// build's version of it. Its writes stay in the outbox, unsent, and its rows are not pulled
/// until the app is updated; every other contract keeps syncing.
public struct UpdateRequired: Hashable, Sendable, Codable {
    /// The contract (`nil` when the server did not name it: then nothing can be pushed).
    public var entity: String?
    /// The oldest version the server still supports.
    public var oldestSupported: Int?
    /// The server's current version.
    public var current: Int?

    /// An update-required answer from what the server said.
    public init(entity: String? = nil, oldestSupported: Int? = nil, current: Int? = nil) {
        self.entity = entity
        self.oldestSupported = oldestSupported
        self.current = current
    }

    enum CodingKeys: String, CodingKey {
        case entity
        case oldestSupported = "oldest_supported"
        case current
    }
}
