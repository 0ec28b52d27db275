public import HTTPTypes
import SyncProtocol

extension HTTPField.Name {
    /// `X-Outpost-Schema`: the device's schema versions (SyncProtocol's `SchemaHeader`).
    public static let outpostSchema = HTTPField.Name(ProtocolHeaders.schema)!
    /// `X-Outpost-Client`: the device's push client id, for `last_seq` on a pull.
    public static let outpostClient = HTTPField.Name(ProtocolHeaders.clientID)!
    /// `X-Outpost-App`: the app and its version, for the fleet census.
    public static let outpostApp = HTTPField.Name(ProtocolHeaders.appVersion)!
    /// `X-Outpost-Telemetry`: the device's own counts, opt-in (SyncProtocol's `TelemetryHeader`).
    public static let outpostTelemetry = HTTPField.Name(ProtocolHeaders.telemetry)!
}

extension HTTPField.Name {
    /// `X-Forwarded-For`: the addresses a request passed through, read only from a trusted proxy.
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
    /// `X-Forwarded-Proto`: the scheme a client used, read only from a trusted proxy.
    static let xForwardedProto = HTTPField.Name("X-Forwarded-Proto")!
    /// `Sec-Fetch-Site`: whether a browser's request came from the same site (the console's forms).
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
}
