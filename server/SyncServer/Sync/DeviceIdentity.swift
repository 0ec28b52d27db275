public import ContractRuntime
import Foundation

/// Who is calling, as a verified token says.
public struct DeviceIdentity: Hashable, Sendable, Codable {
    /// The tenant the token was issued for.
    public var tenant: String
    /// The user the token names.
    public var userID: String
    /// The device the token names.
    public var deviceID: String
    /// The teams whose `team` scope the device may read and write.
    public var teams: [String]
    /// Admin tokens publish and delete content; they are not devices.
    public var isAdmin: Bool
    /// Integration tokens (a backend service's) read the tenant's change feed, and nothing
    /// else an admin may do. Not encoded: a decoded identity holds no more than a device's.
    public var isIntegration = false
    /// Seconds since 1970.
    public var expiresAt: Int64
    /// When the token was issued, seconds since 1970; a revocation or an erasure refuses every
    /// token issued at or before it, and up to ``TokenSigner/issuedAtLeeway`` after it.
    public var issuedAt: Int64?
    /// When the server erased this user's data, seconds since 1970, as authentication read it;
    /// `nil` when never. A push stream that last moved before it belongs to a store the erasure
    /// wiped, however new the token that names it (`410 user_erased`).
    public var userErasedAt: Int64?

    /// An identity from a token's claims.
    public init(
        tenant: String, userID: String, deviceID: String, teams: [String] = [], isAdmin: Bool = false, isIntegration: Bool = false,
        expiresAt: Int64, issuedAt: Int64? = nil
    ) {
        self.tenant = tenant
        self.userID = userID
        self.deviceID = deviceID
        self.teams = teams
        self.isAdmin = isAdmin
        self.isIntegration = isIntegration
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
    }

    /// The owner a push stream of this identity records (see ``ClientOwner``).
    package var clientOwner: ClientOwner { ClientOwner(userID: userID, deviceID: deviceID) }

    enum CodingKeys: String, CodingKey {
        case tenant = "tnt"
        case userID = "usr"
        case deviceID = "dev"
        case teams = "tms"
        case isAdmin = "adm"
        case expiresAt = "exp"
        case issuedAt = "iat"
        case userErasedAt = "era"
    }
}

/// Which scope key a row belongs to, and whether an identity may read or write it.
///
/// A scope key template's placeholders are filled from the token (`{tenant_id}`, `{user_id}`,
/// `{device_id}`) and, for any other placeholder (`{team_id}`), from the row's field of that
/// name, which the contract compiler guarantees exists (SCOPE_KEY_FIELD_MISSING).
public enum ScopeAccess {
    /// The scope key of a row of a contract in `scope`, from its wire payload.
    public static func key(for scope: ScopeDescriptor, row: [String: JSONValue], identity: DeviceIdentity) -> String? {
        key(for: scope, identity: identity) { row[$0] }
    }

    /// The scope key of a row whose fields' wire values `field` looks up by name: only the
    /// template's placeholders are looked up.
    static func key(for scope: ScopeDescriptor, identity: DeviceIdentity, field: (String) -> JSONValue?) -> String? {
        scope.key { name in
            if let value = tokenValue(name, identity) { return value }
            if case .string(let text)? = field(name) { return text }
            return nil
        }
    }

    /// The value the token fills for a placeholder (`{tenant_id}`, `{user_id}`, `{device_id}`), if it fills it.
    private static func tokenValue(_ name: String, _ identity: DeviceIdentity) -> String? {
        switch name {
        case ScopePlaceholder.tenantID.rawValue: identity.tenant
        case ScopePlaceholder.userID.rawValue: identity.userID
        case ScopePlaceholder.deviceID.rawValue: identity.deviceID
        default: nil
        }
    }

    /// Every scope key the identity may read in `scope`.
    public static func readableKeys(in scope: ScopeDescriptor, identity: DeviceIdentity) -> [String] {
        if scope.placeholders.contains(ScopePlaceholder.teamID.rawValue) {
            return identity.teams.sorted().compactMap { team in
                scope.key { name in name == ScopePlaceholder.teamID.rawValue ? team : tokenValue(name, identity) }
            }
        }
        return scope.key { tokenValue($0, identity) }.map { [$0] } ?? []
    }

    /// Whether the identity may read rows filed under `key` in `scope`.
    public static func canRead(_ key: String, in scope: ScopeDescriptor, identity: DeviceIdentity) -> Bool {
        identity.isAdmin || readableKeys(in: scope, identity: identity).contains(key)
    }

    /// Whether the identity may write rows filed under `key`: devices never write read-only scopes.
    public static func canWrite(_ key: String, in scope: ScopeDescriptor, identity: DeviceIdentity) -> Bool {
        if identity.isAdmin { return true }
        return scope.access == .readWrite && readableKeys(in: scope, identity: identity).contains(key)
    }

    /// The scope a pull names: a scope name (`user`, when the token fills its key) or a full key
    /// (`ops:team:t-1`). Returns the scope and the key, or `nil` when it matches none.
    public static func resolve(
        _ requested: String, identity: DeviceIdentity, contracts: ContractCatalog
    ) -> (scope: ScopeDescriptor, key: String)? {
        if let scope = contracts.scope(named: requested) {
            let keys = readableKeys(in: scope, identity: identity)
            return keys.count == 1 ? (scope, keys[0]) : nil
        }
        for scope in contracts.scopes where matches(requested, template: scope.keyTemplate) {
            return (scope, requested)
        }
        return nil
    }

    /// Whether `key` has the shape of `template` (literal parts equal, placeholders non-empty).
    static func matches(_ key: String, template: String) -> Bool {
        var pattern = "^"
        var literal = ""
        var inPlaceholder = false
        for character in template {
            if character == "{" {
                pattern += NSRegularExpression.escapedPattern(for: literal)
                literal = ""
                inPlaceholder = true
            } else if character == "}" && inPlaceholder {
                pattern += "[^:]+"
                inPlaceholder = false
            } else if !inPlaceholder {
                literal.append(character)
            }
        }
        pattern += NSRegularExpression.escapedPattern(for: literal) + "$"
        return key.range(of: pattern, options: .regularExpression) != nil
    }
}
