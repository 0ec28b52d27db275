/// How much state one identity can make the server keep. Every table or memory structure that
/// grows with what a device, an integration or a tenant admin sends has a cap here, so a token
/// in hostile hands grows nothing without bound (docs/security.md, "Bounds").
public struct IdentityStateLimits: Sendable, Hashable {
    /// Contract names (and their versions) the fleet census keeps for one device, from its
    /// `X-Outpost-Schema` header (64): names past it are not recorded.
    public var censusContractsPerDevice: Int
    /// Sinks one tenant may hold (32): adding one more is 409 `limit_reached`.
    public var sinksPerTenant: Int
    /// Console sessions open at once in one tenant (32): signing in past it ends that tenant's
    /// oldest session.
    public var consoleSessionsPerTenant: Int

    public init(censusContractsPerDevice: Int = 64, sinksPerTenant: Int = 32, consoleSessionsPerTenant: Int = 32) {
        self.censusContractsPerDevice = censusContractsPerDevice
        self.sinksPerTenant = sinksPerTenant
        self.consoleSessionsPerTenant = consoleSessionsPerTenant
    }
}
