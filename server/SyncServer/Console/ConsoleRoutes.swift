import ContractRuntime
import Foundation
import Hummingbird
import Logging
import Mustache
import NIOCore
import SyncProtocol

/// The operator console at `/console`: server-rendered pages over the same storage and services
/// the admin routes use, for an admin signed in with an admin token (docs/console.md).
///
/// HTML, not API: its routes are registered on the router directly, outside the route table
/// `docs/openapi.yaml` describes, and answer pages (errors too, through ``ConsolePageMiddleware``).
///
/// - Sign-in exchanges an admin token, checked exactly as ``AuthenticationMiddleware`` checks it,
///   for a session (``ConsoleSessionStore``) held in an `HttpOnly; SameSite=Strict` cookie; every
///   request checks the session again: the retirement of the key that signed the admin token, or
///   the admin's revocation or erasure, ends it. A tenant has at most
///   ``IdentityStateLimits/consoleSessionsPerTenant`` sessions; the Sessions page lists and ends them.
/// - Every form field that names something passes ``Identifier`` before it is used; a form that
///   does not read is refused whole.
/// - Every POST carries the session's CSRF token (compared in constant time) and must come from
///   the console's own pages as the browser tells it (`Origin` or `Referer`, `Sec-Fetch-Site`);
///   anything else is 403 and changes nothing.
package struct ConsoleRoutes: Sendable {
    /// Where the console lives.
    package static let root = "/console"
    /// How many troubled pushes a page of the conflicts page shows.
    static let conflictsPageSize = 25

    let configuration: ServerConfiguration
    let environment: ServerEnvironment
    let sessions: ConsoleSessionStore
    let queries: ConsoleQueries
    let authenticator: AuthenticationMiddleware
    /// The devices the server has seen (the fleet and device pages).
    let census: FleetCensus
    /// The byte budget and shared memory of the list pages (fleet, conflicts, access).
    let listing: ListingBudget

    init(configuration: ServerConfiguration, environment: ServerEnvironment, census: FleetCensus, listing: ListingBudget? = nil) {
        self.listing =
            listing
            ?? ListingBudget(
                pageBytes: configuration.pageBytes, memory: ResponseMemoryBudget(capacity: configuration.responseMemoryBytes),
                largestItemBytes: environment.storage.contracts.largestRowBytes)
        self.configuration = configuration
        self.environment = environment
        self.census = census
        sessions = ConsoleSessionStore(storage: environment.storage.engine)
        queries = ConsoleQueries(storage: environment.storage.engine)
        authenticator = AuthenticationMiddleware(signer: environment.signer, storage: environment.storage, clock: environment.clock)
    }

    /// Adds the console's routes to `router` (not to the API's route table).
    func register(on router: Router<SyncRequestContext>) {
        let console = router.group(RouterPath(Self.root))
        console.add(middleware: ConsolePageMiddleware())
        console.get(use: overview)
        console.get("sign-in", use: signInForm)
        console.post("sign-in", use: signIn)
        console.post("sign-out", use: signOut)
        console.get("static/{file}", use: staticFile)
        console.get("devices/{user}/{device}", use: device)
        console.post("devices/{user}/{device}/revoke", use: revokeDevice)
        console.get("conflicts", use: conflicts)
        console.get("audit", use: audit)
        console.post("audit/verify", use: verifyAudit)
        console.get("access", use: access)
        console.post("revocations", use: revoke)
        console.get("erasures/confirm", use: confirmErasure)
        console.post("erasures", use: erase)
        console.get("activity", use: activity)
        console.get("activity/charts", use: activityCharts)
        console.get("sessions", use: sessionList)
        console.post("sessions/end", use: endSession)
    }

    private var now: Int64 { environment.clock.now().millisecondsSince1970 / 1000 }

    // MARK: Signing in and out

    @Sendable func signInForm(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let notice: String? =
            switch request.query("ended") {
            case "signed-out": "You are signed out."
            case "expired":
                "Your session ended: it expired, or it was ended from the Sessions page or by newer sign-ins past the tenant's limit. Sign in again."
            case "revoked": "Your session ended: the admin token's device or user was revoked, or its user erased."
            case "key-retired": "Your session ended: the key that signed its admin token was retired. Sign in with a token signed by a current key."
            default: nil
            }
        return ConsolePages.page("sign-in", title: "Sign in", session: nil, context: ["notice": notice])
    }

    @Sendable func signIn(_ request: Request, context: SyncRequestContext) async throws -> Response {
        if let reason = ConsoleRequest.crossSiteRefusal(request, configuration: configuration) { throw ConsoleRefusal.crossSite(reason) }
        let form: [String: String]
        do {
            form = try await ConsoleRequest.form(request)
        } catch {
            throw ConsoleRefusal.form(error.detail.message, session: nil)
        }
        let token = (form["token"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let identity: DeviceIdentity
        do {
            identity = try await authenticator.authenticate("Bearer " + token).identity
        } catch  where error.status == 503 {
            return ConsolePages.page(
                "sign-in", title: "Sign in", session: nil, status: .serviceUnavailable,
                context: ["error": "The server cannot check tokens right now. Try again in a moment."])
        } catch {
            // The log says what was wrong; the page does not tell a guesser which part was.
            context.logger.notice("console sign-in refused", metadata: ["reason": .string(error.detail.code.rawValue)])
            return refusedSignIn()
        }
        // An admin token is signed with one of the server's own keys: the session holds while
        // that key is accepted.
        guard identity.isAdmin, let keyID = TokenSigner.keyID(ofToken: token) else {
            context.logger.notice("console sign-in refused", metadata: ["reason": "not an admin token"])
            return refusedSignIn()
        }
        let now = self.now
        let lifetime = configuration.console.sessionLifetime.components.seconds
        let expiresAt = min(identity.expiresAt, now + lifetime)
        let limit = configuration.identityLimits.consoleSessionsPerTenant
        let (id, _) = try await ServiceError.catchingStorageFailures {
            try await sessions.open(for: identity, keyID: keyID, now: now, expiresAt: expiresAt, limit: limit)
        }
        context.logger.notice("console session opened", metadata: ["outpost.user": .string(identity.userID)])
        var response = ConsolePages.redirect(to: Self.root)
        response.headers[.setCookie] = ConsoleRequest.sessionCookie(
            id, maxAge: expiresAt - now, secure: ConsoleRequest.wantsSecureCookie(request, context: context, configuration: configuration))
        return response
    }

    private func refusedSignIn() -> Response {
        ConsolePages.page(
            "sign-in", title: "Sign in", session: nil, status: .unauthorized,
            context: [
                "error":
                    "That token was not accepted. Paste an admin token of this server that has not expired or been revoked (sync-server token --admin prints one)."
            ])
    }

    @Sendable func signOut(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let (_, _) = try await signedInForm(request, context)
        if let id = ConsoleRequest.sessionID(request) {
            _ = try await ServiceError.catchingStorageFailures { try await sessions.close(id: id) }
        }
        var response = ConsolePages.redirect(to: Self.root + "/sign-in?ended=signed-out")
        response.headers[.setCookie] = ConsoleRequest.expiredCookie(
            secure: ConsoleRequest.wantsSecureCookie(request, context: context, configuration: configuration))
        return response
    }

    /// The session of a page request; without a valid one the browser is sent to sign in.
    func signedIn(_ request: Request, _ context: SyncRequestContext) async throws -> ConsoleSession {
        guard let id = ConsoleRequest.sessionID(request) else { throw ConsoleRedirect.signIn(nil) }
        let now = self.now
        let found = try await ServiceError.catchingStorageFailures { try await sessions.session(id: id, now: now) }
        guard let session = found else { throw ConsoleRedirect.signIn("expired") }
        // The key that signed the admin token, against the keyring the API verifies with: once
        // it is retired (or was never recorded), the session ends as the token is refused.
        guard let keyID = session.keyID, await environment.signer.acceptsOwnKey(keyID) else {
            _ = try? await sessions.close(id: id)
            context.logger.notice("console session ended: its key was retired", metadata: ["outpost.user": .string(session.userID)])
            throw ConsoleRedirect.signIn("key-retired")
        }
        // The admin's revocation or erasure ends the session at once, as it refuses the token.
        let (tenant, user, device) = (session.tenant, session.userID, session.deviceID)
        let state = try await ServiceError.catchingStorageFailures {
            try await environment.storage.engine.readOneStatement { try await $0.identityState(tenant: tenant, userID: user, deviceID: device) }
        }
        if state.refusal(ofTokenIssuedAt: session.tokenIssuedAt) != nil {
            _ = try? await sessions.close(id: id)
            throw ConsoleRedirect.signIn("revoked")
        }
        return session
    }

    /// The session and form of a state-changing request, once it proved it came from the
    /// session's own pages: the form's `csrf` is the session's token, and the browser does not
    /// say it came from another site.
    func signedInForm(_ request: Request, _ context: SyncRequestContext) async throws -> (ConsoleSession, [String: String]) {
        let session = try await signedIn(request, context)
        if let reason = ConsoleRequest.crossSiteRefusal(request, configuration: configuration) { throw ConsoleRefusal.crossSite(reason) }
        let form: [String: String]
        do {
            form = try await ConsoleRequest.form(request)
        } catch {
            throw ConsoleRefusal.form(error.detail.message, session: session)
        }
        guard let sent = form["csrf"], !sent.isEmpty else { throw ConsoleRefusal.csrf("it carries no security token") }
        guard ConsoleSessionStore.isWellFormedToken(sent), MetricsToken.matches(sent, session.csrfToken) else {
            throw ConsoleRefusal.csrf("its security token is not this session's")
        }
        return (session, form)
    }

    // MARK: Static files

    @Sendable func staticFile(_ request: Request, context: SyncRequestContext) async throws -> Response {
        guard let name = context.parameters.get("file"), let file = ConsoleAssets.files[name] else {
            throw ConsoleRefusal(status: .notFound, heading: "Not found", message: "There is no such file.")
        }
        return Response(
            status: .ok, headers: [.contentType: file.contentType, .cacheControl: "no-cache"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: file.text)))
    }

    // MARK: Fleet and devices

    /// The active windows the fleet page offers (any other `?active=` is taken too).
    static let activeWindows = [("24h", "24 hours"), ("7d", "7 days"), ("30d", "30 days"), ("90d", "90 days")]
    /// The devices the fleet page lists.
    static let fleetDeviceLimit = 100
    /// A share of active devices refused above which the rollout gate warns (1 %).
    static let gateThreshold = 0.01

    @Sendable func overview(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let session = try await signedIn(request, context)
        let activeText = request.query("active").flatMap { $0.isEmpty ? nil : $0 } ?? "30d"
        guard let window = FleetSummary.window(activeText) else {
            throw ConsoleRefusal(
                status: .badRequest, heading: "Not a window", message: "`active` is a duration such as 7d, 24h or 90d.", session: session)
        }
        let (tenant, now, pageBytes) = (session.tenant, self.now, listing.pageBytes)
        let lease = try await listing.reserve()
        defer { lease.release() }
        let (summary, devices, revocations) = try await ServiceError.catchingStorageFailures {
            (
                try await census.summary(tenant: tenant, now: now, activeSeconds: window, pageBytes: pageBytes),
                try await census.devicesPage(tenant: tenant, limit: Self.fleetDeviceLimit, pageBytes: pageBytes).devices,
                try await environment.storage.engine.read { try await $0.revocations(tenant: tenant) }
            )
        }
        let revokedDevices = Dictionary(revocations.filter { $0.kind == .device }.map { ($0.subject, $0.revokedAt) }, uniquingKeysWith: max)
        let revokedUsers = Dictionary(revocations.filter { $0.kind == .user }.map { ($0.subject, $0.revokedAt) }, uniquingKeysWith: max)
        var windows = Self.activeWindows.map { ["value": $0.0, "label": $0.1, "selected": $0.0 == activeText] }
        if !Self.activeWindows.contains(where: { $0.0 == activeText }) {
            windows.append(["value": activeText, "label": Self.windowLabel(window), "selected": true])
        }
        let contractNames = summary.contracts.keys.sorted()
        let gateContract = request.query("contract").flatMap { contractNames.contains($0) ? $0 : nil } ?? contractNames.first
        var gate: [String: Any]?
        var gateVersion = ""
        if let gateContract, let text = request.query("oldest_supported"), !text.isEmpty {
            guard let version = Int(text), version >= 1 else {
                throw ConsoleRefusal(
                    status: .badRequest, heading: "Not a version", message: "`oldest_supported` is a schema version, 1 or more.", session: session)
            }
            gateVersion = String(version)
            gate = Self.gate(summary, contract: gateContract, oldestSupported: version)
        } else if let gateContract, let versions = summary.contracts[gateContract], let current = versions.keys.max() {
            gateVersion = String(current)
        }
        let fleet: [String: Any?] = [
            "tenant": tenant, "generatedAt": ConsolePages.time(seconds: summary.generatedAt), "windowLabel": Self.windowLabel(window),
            "windows": windows, "activeValue": activeText, "active": summary.devices.active, "stale": summary.devices.stale,
            "hasContracts": !summary.contracts.isEmpty,
            "contracts": contractNames.flatMap { name in
                summary.contracts[name]!.sorted { $0.key > $1.key }.map { version, counts in
                    ["contract": name, "version": version, "active": counts.active, "stale": counts.stale] as [String: Any]
                }
            },
            "hasAppVersions": !summary.appVersions.isEmpty,
            "appVersions": summary.appVersions.sorted { $0.key > $1.key }.map {
                ["version": $0.key, "active": $0.value.active, "stale": $0.value.stale] as [String: Any]
            },
            "contractNames": contractNames.map { ["name": $0, "selected": $0 == gateContract] },
            "gateVersion": gateVersion, "gate": gate,
            "hasDevices": !devices.isEmpty, "deviceCount": devices.count,
            "devices": devices.map { device -> [String: Any] in
                let revoked = revokedDevices[device.deviceID] ?? revokedUsers[device.userID]
                return [
                    "href": Self.devicePath(user: device.userID, device: device.deviceID), "device": device.deviceID, "user": device.userID,
                    "app": device.appVersion ?? "unknown", "lastSeen": ConsolePages.time(seconds: device.lastSeenAt),
                    "outcome": "\(device.lastRoute) \(device.lastOutcome)",
                    "state": revoked.map { "revoked \(ConsolePages.time(seconds: $0))" }
                        ?? (device.lastSeenAt >= now - window ? "active" : "stale"),
                ]
            },
        ]
        return ConsolePages.page(
            "fleet", title: "Fleet", session: session, current: "fleet", context: ["census": ConsolePages.present(fleet)])
    }

    /// What raising `contract`'s oldest supported version to `oldestSupported` would refuse now.
    static func gate(_ summary: FleetSummary, contract: String, oldestSupported: Int) -> [String: Any] {
        let (refused, active) = summary.cutoff(contract: contract, oldestSupported: oldestSupported)
        let share = active == 0 ? 0 : Double(refused) / Double(active)
        let percent = String(format: "%.1f %%", share * 100)
        let devices = refused == 1 ? "device" : "devices"
        if refused == 0 {
            return [
                "tone": "ok", "headline": "No active device would be refused: oldest_supported \(oldestSupported) for \(contract) is safe now.",
                "explanation": "Every active device that declared \(contract) runs version \(oldestSupported) or later.",
            ]
        }
        let over = share > gateThreshold
        return [
            "tone": over ? "bad" : "ok",
            "headline":
                "\(refused) active \(devices) would be refused and purge \(contract) (\(percent) of \(active)): \(over ? "above" : "within") the 1 % gate.",
            "explanation":
                "They run \(contract) below version \(oldestSupported): raising oldest_supported to it answers them 426 schema_too_old until they update. "
                + (over ? "Wait until more of them updated." : "Few enough to go ahead."),
        ]
    }

    static func windowLabel(_ seconds: Int64) -> String {
        if seconds % 86_400 == 0 { return seconds == 86_400 ? "24 hours" : "\(seconds / 86_400) days" }
        if seconds % 3600 == 0 { return seconds == 3600 ? "hour" : "\(seconds / 3600) hours" }
        if seconds % 60 == 0 { return "\(seconds / 60) minutes" }
        return "\(seconds) seconds"
    }

    @Sendable func device(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let session = try await signedIn(request, context)
        let (user, device) = (try RequestInput.parameter("user", context), try RequestInput.parameter("device", context))
        let tenant = session.tenant
        let (found, state) = try await ServiceError.catchingStorageFailures {
            (
                try await census.device(tenant: tenant, userID: user, deviceID: device),
                try await environment.storage.engine.read { try await $0.identityState(tenant: tenant, userID: user, deviceID: device) }
            )
        }
        guard let found else {
            throw ConsoleRefusal(
                status: .notFound, heading: "Device \(device)",
                message: "The census has not seen device \(device) of user \(user) in tenant \(tenant).",
                session: session)
        }
        let access: String =
            if let erased = state.erasedAt {
                "The user's data was erased at \(ConsolePages.time(seconds: erased)) (UTC)."
            } else if let revoked = state.revokedAt {
                "Revoked at \(ConsolePages.time(seconds: revoked)) (UTC): its tokens issued until then are refused."
            } else {
                "Not revoked."
            }
        let telemetry = DeviceTelemetry.allCases.compactMap { name in
            found.telemetry[name].map { ["name": Self.telemetryLabel(name), "value": $0] as [String: Any] }
        }
        let context: [String: Any?] = [
            "tenant": tenant, "user": user, "device": device, "app": found.appVersion ?? "unknown (the app sends no X-Outpost-App)",
            "firstSeen": ConsolePages.time(seconds: found.firstSeenAt), "lastSeen": ConsolePages.time(seconds: found.lastSeenAt),
            "pushes": found.pushes, "pulls": found.pulls, "failures": found.failures, "access": access,
            "notice": request.query("done") == "revoked" ? "Device \(device) is revoked: its next request gets 401." : nil,
            "hasSchema": !found.schema.isEmpty,
            "schema": found.schema.sorted { $0.key < $1.key }.map { ["contract": $0.key, "version": $0.value] as [String: Any] },
            "hasTelemetry": !telemetry.isEmpty, "telemetry": telemetry, "hasRecent": !found.recent.isEmpty,
            "recent": found.recent.map {
                [
                    "when": ConsolePages.time(seconds: $0.at), "route": $0.route, "status": $0.status, "outcome": $0.outcome,
                    "milliseconds": $0.milliseconds,
                ] as [String: Any]
            },
            "revokeAction": Self.devicePath(user: user, device: device) + "/revoke",
        ]
        return ConsolePages.page("device", title: "Device \(device)", session: session, current: "fleet", context: context)
    }

    static func telemetryLabel(_ name: DeviceTelemetry) -> String {
        switch name {
        case .outboxPending: "Outbox: writes waiting"
        case .conflictsOpen: "Conflicts open on the device"
        case .syncsOK: "Syncs that ended well"
        case .syncsFailed: "Syncs that failed"
        case .conflicts: "Writes answered conflicted or rejected"
        case .writesQueued: "Writes queued"
        case .writesDelivered: "Writes delivered"
        case .cacheHits: "Cache hits"
        case .cacheMisses: "Cache misses"
        case .cacheEvictions: "Rows evicted"
        }
    }

    @Sendable func revokeDevice(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let (session, _) = try await signedInForm(request, context)
        let (user, device) = (try RequestInput.parameter("user", context), try RequestInput.parameter("device", context))
        try await revoke(.device, device, in: session.tenant)
        context.logger.notice("console revoked a device", metadata: ["outpost.subject": .string(device)])
        return ConsolePages.redirect(to: Self.devicePath(user: user, device: device) + "?done=revoked")
    }

    static func devicePath(user: String, device: String) -> String {
        "\(root)/devices/\(pathComponent(user))/\(pathComponent(device))"
    }

    static func pathComponent(_ text: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#%")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    // MARK: Conflicts

    @Sendable func conflicts(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let session = try await signedIn(request, context)
        var before: Int64?
        if let text = request.query("before"), !text.isEmpty {
            guard let id = Int64(text), id > 0 else {
                throw ConsoleRefusal(status: .badRequest, heading: "Not a page", message: "`before` must be an entry number.", session: session)
            }
            before = id
        }
        let (tenant, pageBytes) = (session.tenant, listing.pageBytes)
        let lease = try await listing.reserve()
        defer { lease.release() }
        let (pushes, hasMore) = try await ServiceError.catchingStorageFailures {
            try await queries.troubledPushesPage(tenant: tenant, before: before, limit: Self.conflictsPageSize, pageBytes: pageBytes)
        }
        let entries: [[String: Any]] = pushes.map { push in
            ConsolePages.present([
                "id": push.entry.id, "when": ConsolePages.time(milliseconds: push.entry.recordedAt), "user": push.entry.userID,
                "device": push.entry.deviceID, "deviceHref": Self.devicePath(user: push.entry.userID, device: push.entry.deviceID),
                "push": push.entry.rowID, "outcome": push.entry.outcome.rawValue, "erased": push.detailErased,
                "hasChanges": !push.changes.isEmpty,
                "changes": push.changes.map { change in
                    ConsolePages.present([
                        "entity": change.entity, "rowID": change.rowID, "outcome": change.outcome, "reason": change.reason,
                        "seq": change.seq,
                    ])
                },
            ])
        }
        let older = hasMore ? pushes.last.map { "\(Self.root)/conflicts?before=\($0.entry.id)" } : nil
        return ConsolePages.page(
            "conflicts", title: "Conflicts", session: session, current: "conflicts",
            context: ["tenant": tenant, "entries": entries, "hasEntries": !entries.isEmpty, "older": older, "paged": before != nil])
    }

    // MARK: Audit

    @Sendable func audit(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let session = try await signedIn(request, context)
        return try await auditPage(session, result: nil)
    }

    @Sendable func verifyAudit(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let (session, _) = try await signedInForm(request, context)
        let verification: AuditChain.Verification
        do {
            verification = try await AuditChain.verify(environment.storage)
        } catch {
            context.logger.error("console audit verification failed: \(String(reflecting: error))")
            throw ConsoleRefusal(
                status: .serviceUnavailable, heading: "Verification did not finish",
                message: "The audit log could not be read to the end. Try again in a moment.", session: session)
        }
        environment.metrics.prepareAuditVerifications()
        environment.metrics.recordAuditVerification(verification)
        let result: [String: Any]
        switch verification {
        case .intact(let entries, let keyedFrom):
            var notes: [String] = []
            if keyedFrom > 1 { notes.append("Entries 1–\(keyedFrom - 1) were written before the log was keyed: they are hash-chained only.") }
            result = [
                "tone": "ok",
                "headline": "Audit log intact: \(entries) \(entries == 1 ? "entry" : "entries") verified at \(ConsolePages.time(seconds: now)).",
                "notes": notes,
            ]
        case .broken(let entryID, let reason):
            context.logger.error("console audit verification: broken at entry \(entryID): \(reason)")
            result = ["tone": "bad", "headline": "Audit log broken at entry \(entryID): \(reason).", "notes": [String]()]
        }
        return try await auditPage(session, result: result)
    }

    private func auditPage(_ session: ConsoleSession, result: [String: Any]?) async throws -> Response {
        let head = try await ServiceError.catchingStorageFailures { try await environment.storage.engine.read { try await $0.auditHead() } }
        return ConsolePages.page(
            "audit", title: "Audit log", session: session, current: "audit",
            context: [
                "lastID": head?.lastID ?? 0, "lastHash": head?.lastHash ?? AuditChain.genesis, "keyedFrom": head?.keyedFrom ?? 1,
                "fingerprint": head?.keyFingerprint ?? "none yet", "archivedThrough": head?.base.map(\.lastID),
                "result": result,
            ])
    }

    // MARK: Revocations and erasures

    @Sendable func access(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let session = try await signedIn(request, context)
        let notice: String? =
            switch (request.query("done"), request.query("subject")) {
            case ("revoked-device", let subject?): "Device \(subject) is revoked: its next request gets 401."
            case ("revoked-user", let subject?): "User \(subject) is revoked: their devices' next requests get 401."
            default: nil
            }
        return try await accessPage(session, notice: notice)
    }

    private func accessPage(_ session: ConsoleSession, notice: String?, status: HTTPResponse.Status = .ok) async throws -> Response {
        let tenant = session.tenant
        let (revocations, erasures) = try await ServiceError.catchingStorageFailures {
            (
                try await queries.revocations(tenant: tenant),
                try await queries.erasures(tenant: tenant)
            )
        }
        return ConsolePages.page(
            "access", title: "Revocations and erasures", session: session, current: "access", status: status,
            context: [
                "tenant": tenant, "notice": notice, "hasRevocations": !revocations.isEmpty,
                "revocations": revocations.sorted { $0.revokedAt > $1.revokedAt }.map {
                    ["kind": $0.kind.rawValue, "subject": $0.subject, "when": ConsolePages.time(seconds: $0.revokedAt)]
                },
                "hasErasures": !erasures.isEmpty,
                "erasures": erasures.map { ["user": $0.userID, "when": ConsolePages.time(seconds: $0.erasedAt)] },
            ])
    }

    @Sendable func revoke(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let (session, form) = try await signedInForm(request, context)
        guard let kind = form["kind"].flatMap(RevocationKind.init(rawValue:)) else {
            throw ConsoleRefusal(status: .badRequest, heading: "Nothing revoked", message: "Choose a device or a user.", session: session)
        }
        let subject = try Self.identifier(
            form["subject"], as: kind.rawValue, missing: "Give the id of the device or user.", heading: "Nothing revoked", session)
        try await revoke(kind, subject, in: session.tenant)
        context.logger.notice("console revoked a \(kind.rawValue)", metadata: ["outpost.subject": .string(subject)])
        return ConsolePages.redirect(to: "\(Self.root)/access?done=revoked-\(kind.rawValue)&subject=\(Self.queryValue(subject))")
    }

    /// The revocation `POST /admin/v1/revocations` makes.
    private func revoke(_ kind: RevocationKind, _ subject: String, in tenant: String) async throws {
        let now = self.now
        try await ServiceError.catchingStorageFailures {
            try await environment.storage.engine.write { try await $0.revoke(tenant: tenant, kind: kind, subject: subject, at: now) }
        }
    }

    @Sendable func confirmErasure(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let session = try await signedIn(request, context)
        let user = try erasable(request.query("user"), session)
        return try await confirmationPage(session, user: user, error: nil)
    }

    private func confirmationPage(_ session: ConsoleSession, user: String, error: String?) async throws -> Response {
        let tenant = session.tenant
        let preview = try await ServiceError.catchingStorageFailures { try await queries.erasurePreview(tenant: tenant, userID: user) }
        guard preview.holdsAnything else {
            throw ConsoleRefusal(
                status: .notFound, heading: "Nothing to erase",
                message: "The server holds nothing of user \(user) in tenant \(tenant) to erase. Check the id.", session: session)
        }
        return ConsolePages.page(
            "erase-confirm", title: "Erase \(user)?", session: session, current: "access",
            status: error == nil ? .ok : .unprocessableContent,
            context: [
                "tenant": tenant, "user": user, "error": error, "rows": preview.scopes.reduce(0) { $0 + $1.rows },
                "events": preview.scopes.reduce(0) { $0 + $1.events }, "hasScopes": !preview.scopes.isEmpty,
                "scopes": preview.scopes.map { ["key": $0.key, "rows": $0.rows, "events": $0.events] },
                "hasDevices": !preview.devices.isEmpty, "devices": preview.devices, "hasTeams": !preview.teams.isEmpty, "teams": preview.teams,
                "erasedBefore": preview.erasedAt.map { ConsolePages.time(seconds: $0) },
            ])
    }

    @Sendable func erase(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let (session, form) = try await signedInForm(request, context)
        let user = try erasable(form["user"], session)
        guard form["confirm"]?.trimmingCharacters(in: .whitespaces) == user else {
            return try await confirmationPage(
                session, user: user, error: "The id you typed is not \(user). Nothing was erased: type it exactly to confirm.")
        }
        let report = try await UserErasure(storage: environment.storage, clock: environment.clock).erase(
            tenant: session.tenant, userID: user, requestedBy: UserErasure.Requester(userID: session.userID, deviceID: session.deviceID))
        context.logger.notice("user erased", metadata: ["user": .string(report.userID), "rows": .stringConvertible(report.rowsErased)])
        return ConsolePages.page(
            "erased", title: "\(user) erased", session: session, current: "access",
            context: [
                "tenant": report.tenant, "user": report.userID, "when": ConsolePages.time(seconds: report.erasedAt), "rows": report.rowsErased,
                "events": report.eventsDeleted, "pushResults": report.pushResultsDeleted, "auditDetails": report.auditDetailsErased,
            ])
    }

    /// A user id the admin may erase: present, an identifier, and not the admin's own (whose
    /// session, and every token, the erasure would end).
    private func erasable(_ text: String?, _ session: ConsoleSession) throws -> String {
        let user = try Self.identifier(text, as: "user", missing: "Give the id of the user to erase.", heading: "Nothing to erase", session)
        guard user != session.userID else {
            throw ConsoleRefusal(
                status: .badRequest, heading: "Not your own user",
                message: "An admin cannot erase its own user (\(user)): every token of it, this session's included, would be refused.",
                session: session)
        }
        return user
    }

    /// A form field or query value that names a device or user: trimmed of spaces, then held to
    /// ``Identifier`` (not empty, no U+0000 or other control character, at most 256 bytes, NFC)
    /// before anything is looked up or changed; refused with a page that says why otherwise.
    static func identifier(
        _ text: String?, as name: String, missing: String, heading: String, _ session: ConsoleSession
    ) throws(ConsoleRefusal) -> String {
        let value = (text ?? "").trimmingCharacters(in: .whitespaces)
        guard !value.isEmpty else { throw ConsoleRefusal(status: .badRequest, heading: heading, message: missing, session: session) }
        do {
            try Identifier.require(value, as: name)
        } catch {
            throw ConsoleRefusal(
                status: .badRequest, heading: heading, message: "Nothing was changed: \(error.detail.message).", session: session)
        }
        return value
    }

    static func queryValue(_ text: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+#")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    // MARK: Sessions

    @Sendable func sessionList(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let session = try await signedIn(request, context)
        let notice: String? = request.query("done") == "ended" ? "The session is ended: its next request goes to the sign-in form." : nil
        return try await sessionsPage(session, notice: notice)
    }

    private func sessionsPage(_ session: ConsoleSession, notice: String?, status: HTTPResponse.Status = .ok) async throws -> Response {
        let (tenant, now) = (session.tenant, self.now)
        let limit = configuration.identityLimits.consoleSessionsPerTenant
        // The cap bounds the list; the margin shows any that concurrent sign-ins left over it.
        let open = try await ServiceError.catchingStorageFailures {
            try await sessions.sessions(tenant: tenant, now: now, limit: max(1, limit) + 16)
        }
        return ConsolePages.page(
            "sessions", title: "Sessions", session: session, current: "sessions", status: status,
            context: [
                "tenant": tenant, "notice": notice, "limit": limit, "count": open.count,
                "sessions": open.map { other -> [String: Any] in
                    [
                        "handle": other.handle, "user": other.userID, "device": other.deviceID, "kid": other.keyID ?? "unknown",
                        "opened": ConsolePages.time(seconds: other.createdAt), "expires": ConsolePages.time(seconds: other.expiresAt),
                        "own": other.handle == session.handle,
                    ]
                },
            ])
    }

    /// Ends one of the tenant's sessions by its handle; ending one's own is signing out.
    @Sendable func endSession(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let (session, form) = try await signedInForm(request, context)
        guard let handle = form["session"], ConsoleSessionStore.isWellFormedHandle(handle) else {
            throw ConsoleRefusal(
                status: .badRequest, heading: "No session ended",
                message: "Nothing was changed: the form names no session (a session is named by 32 hex digits, as the Sessions page lists it).",
                session: session)
        }
        let tenant = session.tenant
        let ended = try await ServiceError.catchingStorageFailures { try await sessions.close(handle: handle, tenant: tenant) }
        guard ended else {
            return try await sessionsPage(
                session, notice: "No session \(handle) is open in tenant \(tenant): it ended already. Nothing was changed.", status: .notFound)
        }
        context.logger.notice("console session ended", metadata: ["outpost.user": .string(session.userID)])
        guard handle != session.handle else {
            var response = ConsolePages.redirect(to: Self.root + "/sign-in?ended=signed-out")
            response.headers[.setCookie] = ConsoleRequest.expiredCookie(
                secure: ConsoleRequest.wantsSecureCookie(request, context: context, configuration: configuration))
            return response
        }
        return ConsolePages.redirect(to: Self.root + "/sessions?done=ended")
    }

    // MARK: Activity

    @Sendable func activity(_ request: Request, context: SyncRequestContext) async throws -> Response {
        let session = try await signedIn(request, context)
        let charts = ConsoleCharts.fragment(environment.metrics.recentActivity.lastHour(at: now))
        return ConsolePages.page("activity", title: "The last hour", session: session, current: "activity", context: ["charts": charts])
    }

    /// The charts alone, for the page's script to refresh them.
    @Sendable func activityCharts(_ request: Request, context: SyncRequestContext) async throws -> Response {
        _ = try await signedIn(request, context)
        return ConsolePages.html(ConsoleCharts.fragment(environment.metrics.recentActivity.lastHour(at: now)))
    }
}
