import Foundation

/// What `login` stores in the home folder (`device.json`): the server, the token, and who the
/// device is.
struct DeviceProfile: Codable, Equatable {
    var server: URL
    var token: String
    var tenant: String
    var user: String
    var device: String
    /// The teams the token lets the device read and write.
    var teams: [String]
    /// The scope keys every sync pulls (`content:global`, `progress:user:u-1`, `ops:team:team-1`).
    var scopes: [String]
    var loggedInAt: Date
    /// A shell command printing a fresh token, run when the server refuses the stored one (the
    /// app's sign-in, for this command-line device); `nil` keeps the stored token.
    var tokenCommand: String?
    /// What the device reports as its app (`X-Outpost-App`); `nil` for a login before it existed.
    var appVersion: String?
    /// Whether the device sends its telemetry with its requests.
    var sendsTelemetry: Bool?
    /// The server's public-key pins (`login --pin-sha256`): every connection must show one of
    /// these keys in its validated chain. `nil` or empty trusts any certificate the system's roots do.
    var publicKeyPins: [String]?

    enum CodingKeys: String, CodingKey {
        case server, token, tenant, user, device, teams, scopes
        case loggedInAt = "logged_in_at"
        case tokenCommand = "token_command"
        case appVersion = "app_version"
        case sendsTelemetry = "sends_telemetry"
        case publicKeyPins = "pin_sha256"
    }

    /// The team a field-service command works in: the only one, or the one asked for.
    func team(_ requested: String?) throws(DeviceFailure) -> String {
        if let requested {
            guard teams.contains(requested) else {
                throw .usage("the device is not in team '\(requested)'", hint: "its teams: \(teams.joined(separator: ", "))")
            }
            return requested
        }
        switch teams.count {
        case 1: return teams[0]
        case 0: throw .badState("the device's token names no team", hint: "log in with a token issued with --team")
        default: throw .usage("the device is in several teams (\(teams.joined(separator: ", "))); pass --team")
        }
    }
}

/// The claims of a device token, read without verifying it (only the server can): who the
/// token says the device is, so `login` needs no other flags.
///
/// The reference server's tokens are JWTs (`header.claims.signature`, base64url) with the
/// claims `sub` (user), `tenant`, `device`, `teams` (which team scopes to ask for; the server
/// decides by its own memberships) and `exp` (expiry).
struct TokenClaims: Decodable, Equatable {
    var tenant: String
    var user: String
    var device: String
    var teams: [String]
    var expiresAt: Date?

    enum CodingKeys: String, CodingKey {
        case tenant
        case user = "sub"
        case device
        case teams
        case expiresAt = "exp"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        tenant = try container.decode(String.self, forKey: .tenant)
        user = try container.decode(String.self, forKey: .user)
        device = try container.decode(String.self, forKey: .device)
        teams = try container.decodeIfPresent([String].self, forKey: .teams) ?? []
        expiresAt = try container.decodeIfPresent(Int64.self, forKey: .expiresAt).map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }

    /// The claims of `token`, or `nil` when it is not shaped like the reference server's tokens.
    static func read(_ token: String) -> TokenClaims? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return nil }
        return try? JSONDecoder().decode(TokenClaims.self, from: data)
    }
}
