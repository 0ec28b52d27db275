import Foundation
import SyncProtocol

/// Who a store belongs to and how it identifies itself to the server.
public struct StoreIdentity: Hashable, Sendable {
    /// The tenant the store's data belongs to.
    public var tenantId: String
    /// The user the store's data belongs to.
    public var userId: String
    /// The device, as the server's token names it.
    public var deviceId: String
    /// This installation's push identity (`client_id` of SyncProtocol's `PushRequest`), made once
    /// when the database is created; `seq` numbers are per client id.
    public var clientId: String
}
