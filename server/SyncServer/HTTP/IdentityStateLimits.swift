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
    /// Subscriptions one device pulls at once (64): a subscription pull naming more is 400
    /// `too_many_subscriptions`.
    public var subscriptionsPerDevice: Int
    /// Rows one subscription may select, its included rows counted (10 000): past it, that
    /// subscription's page is `subscription_too_broad`.
    public var rowsPerSubscription: Int

    /// Limits with the given counts; the defaults are the server's.
    public init(
        censusContractsPerDevice: Int = 64, sinksPerTenant: Int = 32, consoleSessionsPerTenant: Int = 32, subscriptionsPerDevice: Int = 64,
        rowsPerSubscription: Int = 10_000
    ) {
        self.censusContractsPerDevice = censusContractsPerDevice
        self.sinksPerTenant = sinksPerTenant
        self.consoleSessionsPerTenant = consoleSessionsPerTenant
        self.subscriptionsPerDevice = subscriptionsPerDevice
        self.rowsPerSubscription = rowsPerSubscription
    }
}
