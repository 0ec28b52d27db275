import Foundation
package import SyncServer

extension TokenSigner {
    /// A device token issued at `now` (seconds since 1970, the system's clock unless the test
    /// runs the server on another) and valid for `lifetime` seconds: what the harnesses hand
    /// their devices.
    package func token(
        tenant: String, user: String, device: String, teams: [String] = [], isAdmin: Bool = false, lifetime: Int64 = 3600,
        now: Int64 = Int64(Date().timeIntervalSince1970)
    ) -> String {
        sign(
            DeviceIdentity(tenant: tenant, userID: user, deviceID: device, teams: teams, isAdmin: isAdmin, expiresAt: now + lifetime),
            issuedAt: now
        )
    }
}
