public import HTTPTypes
import SyncProtocol

extension HTTPField.Name {
    /// `X-Outpost-Schema`: the device's schema versions (``SchemaHeader``).
    public static let outpostSchema = HTTPField.Name(ProtocolHeaders.schema)!
    /// `X-Outpost-Client`: the device's push client id, for `last_seq` on a pull.
    public static let outpostClient = HTTPField.Name(ProtocolHeaders.clientID)!
}
