import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import SyncClient
import SyncProtocol

struct LoginCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Make the home folder a device of a server: store the server, the token, and the scopes to sync.",
        discussion: """
            Tenant, user, device and teams come from the token's claims (a sync-server token); give them \
            as flags for another token. The scopes to sync are every scope of contracts/contracts.yaml the \
            identity fills (content, the user's progress, each team's records) unless --scope names them. \
            Logging in again as the same user replaces the token; another user needs another home folder \
            (or `logout` first).
            """
    )

    @OptionGroup var device: DeviceOptions

    @Option(help: ArgumentHelp("The server's address.", valueName: "URL"))
    var server: String

    @Option(help: "The device token (`sync-server token …` prints one).")
    var token: String

    @Option(help: "The tenant, when the token does not say.")
    var tenant: String?

    @Option(help: "The user, when the token does not say.")
    var user: String?

    @Option(name: .customLong("device"), help: "The device id, when the token does not say.")
    var deviceID: String?

    @Option(name: .customLong("team"), help: "A team, when the token does not say; repeat for several.")
    var teams: [String] = []

    @Option(name: .customLong("scope"), help: "A scope key to sync instead of the default ones; repeat for several.")
    var scopes: [String] = []

    @Option(
        name: .customLong("token-command"),
        help: ArgumentHelp(
            "A shell command that prints a fresh token, run when the server refuses the stored one (tokens are short-lived).", valueName: "CMD"))
    var tokenCommand: String?

    @Option(
        name: .customLong("app-version"),
        help: ArgumentHelp("The app and version the device reports to the server's fleet census (X-Outpost-App).", valueName: "TEXT"))
    var appVersion = "sync-device/1.0"

    @Flag(help: "Send the device's sync telemetry with its requests (X-Outpost-Telemetry; counts only, no row data).")
    var telemetry = false

    @Option(
        name: .customLong("pin-sha256"),
        help: ArgumentHelp(
            "Only talk to the server when its validated certificate chain holds this public key (base64 SHA-256 of the SubjectPublicKeyInfo); repeat for a backup pin. Needs an https --server.",
            valueName: "BASE64"))
    var pins: [String] = []

    func execute() async throws {
        let home = try device.deviceHome()
        let clock = try device.clock()
        guard let url = URL(string: server), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
            throw DeviceFailure.usage("--server '\(server)' is not an http(s) URL", hint: "for example --server http://127.0.0.1:8080")
        }
        guard AppVersionHeader.isValid(appVersion) else {
            throw DeviceFailure.usage(
                "--app-version must be 1 to \(AppVersionHeader.maximumLength) printable ASCII characters", hint: "for example sync-device/1.0")
        }
        if !pins.isEmpty {
            do {
                _ = try PublicKeyPins(sha256: pins)
            } catch {
                throw DeviceFailure.usage("--pin-sha256: \(error.description)", hint: "print a server's pin with the runbook of docs/security.md")
            }
            guard scheme == "https" else {
                throw DeviceFailure.usage("--pin-sha256 needs an https --server, not \(server)", hint: "pins check the server's TLS certificate")
            }
        }
        let claims = TokenClaims.read(token)
        guard let tenant = tenant ?? claims?.tenant, let user = user ?? claims?.user, let deviceID = deviceID ?? claims?.device else {
            throw DeviceFailure.usage(
                "the token does not say who the device is", hint: "pass --tenant, --user and --device"
            )
        }
        if let expiry = claims?.expiresAt, expiry < Date() {
            throw DeviceFailure.usage("the token expired at \(expiry.iso8601)", hint: "ask the server for a new one (`sync-server token`)")
        }
        let teams = self.teams.isEmpty ? claims?.teams ?? [] : self.teams
        if home.hasProfile {
            let current = try home.profile()
            guard current.tenant == tenant, current.user == user else {
                throw DeviceFailure.badState(
                    "\(home.url.path) is the device of user '\(current.user)' of tenant '\(current.tenant)'",
                    hint: "use another --home for another user, or `sync-device logout` first"
                )
            }
        }
        let profile = DeviceProfile(
            server: url, token: token, tenant: tenant, user: user, device: deviceID, teams: teams.sorted(),
            scopes: scopes.isEmpty ? Self.defaultScopes(tenant: tenant, user: user, device: deviceID, teams: teams) : scopes,
            loggedInAt: clock.now(), tokenCommand: tokenCommand, appVersion: appVersion, sendsTelemetry: telemetry,
            publicKeyPins: pins.isEmpty ? nil : try PublicKeyPins(sha256: pins).sha256
        )
        // A server that answers with a key outside the pins is refused before anything is stored.
        let exchange = try DeviceSession.pinnedExchange(profile.publicKeyPins, timeout: .seconds(5))
        let probe = URLSessionTransport(baseURL: url, timeout: 5, tokenProvider: ClosureTokenProvider { token }, exchange: exchange)
        var answers = true
        do throws(TransportError) {
            var request = probe.makeRequest(path: "health", query: [])
            request.httpMethod = "GET"
            _ = try await probe.perform(request)
        } catch .publicKeyPinMismatch(let expected, let served) {
            throw TransportError.publicKeyPinMismatch(expected: expected, served: served).failure
        } catch {
            answers = false
        }
        // Opening the store creates the database and the tenant's key, and refuses a database that
        // belongs to someone else or to a newer build.
        let store = try DeviceSession.openStore(home: home, profile: profile, clock: clock)
        try store.close()
        try home.save(profile)
        Console.say("logged in to \(url.absoluteString) as user '\(user)' of tenant '\(tenant)' (device '\(deviceID)')")
        Console.say("syncs: " + profile.scopes.joined(separator: ", "))
        Console.say("home: \(home.url.path)")
        if !answers {
            Console.note("note: \(url.absoluteString) does not answer right now; the device works offline and syncs once it does")
            return
        }
        // The device's key, for the signatures of its writes; a sync registers it too.
        let key = try DeviceSession.signingKey(home: home)
        do {
            let registration = DeviceKeyRegistration(publicKey: key.publicKeyX963.base64EncodedString())
            if let answer = try await probe.registerDeviceKey(registration) {
                Console.say("device key: \(answer.fingerprint) (\(answer.outcome))")
            }
        } catch {
            Console.note("note: the device key is not registered yet (\(error.detail.message)); the next sync registers it")
        }
    }

    /// Every scope of the manifest whose key the identity fills: `content:global`,
    /// `progress:user:<user>`, `ops:team:<team>` per team.
    static func defaultScopes(tenant: String, user: String, device: String, teams: [String]) -> [String] {
        let identity = [
            ScopePlaceholder.tenantID.rawValue: tenant, ScopePlaceholder.userID.rawValue: user, ScopePlaceholder.deviceID.rawValue: device,
        ]
        let team = ScopePlaceholder.teamID.rawValue
        var keys: [String] = []
        for scope in ContractRegistry.scopes {
            if scope.placeholders.contains(team) {
                keys += teams.sorted().compactMap { id in scope.key(identity.merging([team: id]) { $1 }) }
            } else if let key = scope.key(identity) {
                keys.append(key)
            }
        }
        return keys
    }
}

struct LogoutCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "Wipe the device: its database, files, key and login.",
        discussion: "Refused (exit 2) while changes have not reached the server, unless --force discards them."
    )

    @OptionGroup var device: DeviceOptions

    @Flag(help: "Wipe even though some changes never reached the server (they are lost).")
    var force = false

    func execute() async throws {
        let session = try device.session()
        try session.store.signOut(force: force, forgetKey: true)
        try session.home.forget()
        Console.say("logged out; \(session.home.url.path) holds no device any more")
    }
}
