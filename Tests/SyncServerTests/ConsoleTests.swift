import ContractRuntime
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// The operator console (`/console`) over a real server on loopback, on both storages: signing in
/// with an admin token, the session cookie, CSRF and cross-site refusals, revoking and erasing
/// through its forms, escaping, expiry and signing out.
@Suite("Operator console", .blockingWork)
struct ConsoleTests {
    /// The `Host` the test client sends, and so the origin of the console's own pages.
    static let ownOrigin = "http://localhost"

    /// A browser of the console: its session cookie and the CSRF token its pages carry.
    struct Browser {
        let client: any TestClientProtocol
        var cookie: String?
        var csrf: String?

        init(_ client: any TestClientProtocol) {
            self.client = client
        }

        func get(_ path: String) async throws -> TestResponse {
            var headers: HTTPFields = [:]
            if let cookie { headers[.cookie] = "outpost_console=\(cookie)" }
            return try await client.execute(uri: path, method: .get, headers: headers)
        }

        /// Posts a form as the console's own pages would: with the session's CSRF token and the
        /// server's origin, unless told otherwise.
        func post(
            _ path: String, _ fields: [String: String] = [:], csrf: String?? = .none, origin: String? = ConsoleTests.ownOrigin,
            extra: HTTPFields = [:]
        ) async throws -> TestResponse {
            var headers = extra
            headers[.contentType] = "application/x-www-form-urlencoded"
            if let cookie { headers[.cookie] = "outpost_console=\(cookie)" }
            if let origin { headers[.origin] = origin }
            var form = fields
            switch csrf {
            case .none: if let token = self.csrf { form["csrf"] = token }
            case .some(.some(let token)): form["csrf"] = token
            case .some(.none): break
            }
            let body = form.map { "\(Self.encode($0.key))=\(Self.encode($0.value))" }.sorted().joined(separator: "&")
            return try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: body))
        }

        static func encode(_ text: String) -> String {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
        }

        /// Signs in with `token`; the browser keeps the cookie and the CSRF token of the page it lands on.
        mutating func signIn(_ token: String) async throws -> TestResponse {
            let response = try await post("/console/sign-in", ["token": token], csrf: .some(nil))
            if let cookie = Self.sessionCookie(response) {
                self.cookie = cookie
                let page = try await get("/console/audit")
                csrf = Self.csrfToken(in: page.bodyText)
            }
            return response
        }

        static func sessionCookie(_ response: TestResponse) -> String? {
            guard let header = response.headers[.setCookie], header.hasPrefix("outpost_console=") else { return nil }
            let value = header.dropFirst("outpost_console=".count).prefix { $0 != ";" }
            return value.isEmpty ? nil : String(value)
        }

        static func csrfToken(in page: String) -> String? {
            guard let range = page.range(of: "name=\"csrf\" value=\"") else { return nil }
            return String(page[range.upperBound...].prefix { $0 != "\"" })
        }
    }

    static func harness(_ kind: StorageKind, configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> HostileHarness {
        try await HostileHarness.make(kind, configure: configure)
    }

    static func revocationCount(_ h: HostileHarness) async throws -> Int {
        try await h.storage.read { try await $0.revocations(tenant: HostileHarness.tenant).count }
    }

    // MARK: Signing in

    @Test(
        "an admin token signs in: a 303 to the console with an HttpOnly, SameSite=Strict cookie on /console, and the pages open",
        arguments: StorageKind.allCases)
    func signInWithAdminToken(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            var browser = Browser(client)
            let form = try await browser.get("/console/sign-in")
            #expect(form.status == .ok)
            #expect(form.bodyText.contains("<label for=\"token\">Admin token</label>") && form.bodyText.contains("lang=\"en\""))
            #expect(form.headers[.contentSecurityPolicy] == "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
            #expect(!form.bodyText.contains("<script>") && !form.bodyText.contains("style="), "no inline script or style")

            let signedIn = try await browser.signIn(h.adminToken)
            #expect(signedIn.status == .seeOther)
            #expect(signedIn.headers[.location] == "/console")
            let cookie = try #require(signedIn.headers[.setCookie])
            #expect(cookie.contains("; Path=/console") && cookie.contains("; HttpOnly") && cookie.contains("; SameSite=Strict"))
            #expect(!cookie.contains("Secure"), "plain HTTP from an untrusted peer: no Secure flag")
            let id = try #require(browser.cookie)
            #expect(id.count >= 43, "256 random bits")
            // Only the id's SHA-256 is stored.
            let stored = try await h.storage.read { try await $0.serverTableQuery("SELECT * FROM console_sessions", []) }
            #expect(stored.count == 1 && stored.first?.text("id_sha256") == Hex.sha256(Data(id.utf8)))
            let columns = ["id_sha256", "tenant", "user_id", "device_id", "csrf_token"]
            #expect(!stored.contains { row in columns.contains { row.text($0) == id } }, "the id itself is nowhere")

            let token = try #require(browser.csrf)
            #expect(token.count >= 43)
            for path in ["/console", "/console/conflicts", "/console/audit", "/console/access", "/console/activity", "/console/sessions"] {
                let page = try await browser.get(path)
                #expect(page.status == .ok, "\(path)")
                #expect(page.bodyText.contains("<main id=\"main\""), "\(path)")
                // Every form that posts carries the session's token, the page's own ones included.
                let posts = page.bodyText.components(separatedBy: "method=\"post\"").count - 1
                let tokens = page.bodyText.components(separatedBy: "name=\"csrf\" value=\"\(token)\"").count - 1
                #expect(posts >= 1 && tokens == posts, "\(path): \(posts) forms post, \(tokens) carry the token")
            }
        }
    }

    @Test("a wrong, non-admin or revoked token gets the form again with one message and 401; no cookie", arguments: StorageKind.allCases)
    func refusedSignIns(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            // The admin's own device is revoked by another admin.
            let other = h.token(user: "root", device: "root-laptop", admin: true)
            let revoked = try await client.execute(
                uri: "/admin/v1/revocations", method: .post, headers: HostileHarness.headers(other, [.contentType: "application/json"]),
                body: ByteBuffer(string: #"{"device": "old-laptop"}"#))
            #expect(revoked.status == .ok)
            let revokedAdmin = h.token(user: "admin", device: "old-laptop", admin: true)

            var pages: [String] = []
            for token in ["not-a-token", "", h.ownerToken, revokedAdmin, h.adminToken + "x"] {
                var browser = Browser(client)
                let response = try await browser.signIn(token)
                #expect(response.status == .unauthorized)
                #expect(response.headers[.setCookie] == nil)
                #expect(response.bodyText.contains("That token was not accepted"))
                #expect(response.headers[.contentType]?.hasPrefix("text/html") == true)
                pages.append(response.bodyText)
            }
            #expect(Set(pages).count == 1, "every refusal reads the same: nothing tells which part was wrong")
            let console = try await Browser(client).get("/console")
            #expect(console.status == .seeOther && console.headers[.location] == "/console/sign-in")
        }
    }

    @Test("refused sign-ins count against the per-address limit on failed authentication: past it, a 429 page with Retry-After")
    func signInsAreRateLimited() async throws {
        let h = try await Self.harness(.sqlite) { $0.peerLimit = ServerConfiguration.RateLimit(requestsPerSecond: 0.01, burst: 2) }
        try await h.live { client in
            var statuses: [HTTPResponse.Status] = []
            var last: TestResponse?
            for _ in 0..<3 {
                var browser = Browser(client)
                let response = try await browser.signIn("guess")
                statuses.append(response.status)
                last = response
            }
            #expect(statuses == [.unauthorized, .unauthorized, .tooManyRequests])
            #expect(last?.headers[.retryAfter] != nil)
            #expect(last?.headers[.contentType]?.hasPrefix("text/html") == true)
            #expect(last?.bodyText.contains("Too many attempts") == true)
            // A valid admin token is never refused for what others at its address did.
            var admin = Browser(client)
            #expect(try await admin.signIn(h.adminToken).status == .seeOther)
        }
    }

    @Test("the cookie is Secure behind a trusted proxy that says HTTPS, and not when an untrusted peer says so")
    func secureCookie() async throws {
        for trusted in [true, false] {
            let h = try await Self.harness(.sqlite) { configuration in
                if trusted { configuration.trustedProxies = TrustedProxies([TrustedProxies.Block("127.0.0.1/32")!]) }
            }
            try await h.live { client in
                let response = try await Browser(client).post(
                    "/console/sign-in", ["token": h.adminToken], csrf: .some(nil), extra: [.xForwardedProto: "https"])
                #expect(response.status == .seeOther)
                #expect(response.headers[.setCookie]?.hasSuffix("; Secure") == trusted)
            }
        }
        let configured = try await Self.harness(.sqlite) { $0.console.secureCookie = true }
        try await configured.live { client in
            let response = try await Browser(client).post("/console/sign-in", ["token": configured.adminToken], csrf: .some(nil))
            #expect(response.headers[.setCookie]?.hasSuffix("; Secure") == true)
        }
    }

    // MARK: CSRF

    @Test(
        "a POST without the CSRF token, with another, from another origin or cross-site is 403 and changes nothing", arguments: StorageKind.allCases)
    func csrfRefusals(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)
            let revoke = ["kind": "device", "subject": "alice-phone"]
            let refused = [
                try await browser.post("/console/revocations", revoke, csrf: .some(nil)),
                try await browser.post("/console/revocations", revoke, csrf: .some("not-the-token")),
                try await browser.post("/console/revocations", revoke, origin: "http://evil.example"),
                try await browser.post("/console/revocations", revoke, origin: "null"),
                try await browser.post(
                    "/console/revocations", revoke, origin: nil, extra: [.referer: "http://evil.example/console/access"]),
                try await browser.post("/console/revocations", revoke, extra: [.secFetchSite: "cross-site"]),
            ]
            for response in refused {
                #expect(response.status == .forbidden)
                #expect(response.bodyText.contains("Nothing was changed"))
            }
            #expect(try await Self.revocationCount(h) == 0)
            let pushed = try await client.push(PushRequest(clientId: "alice-1", schema: [:], mutations: []), token: h.ownerToken)
            #expect(pushed.status == .ok, "the device still works")

            // Without a session, a form goes to sign in and changes nothing either.
            let anonymous = try await Browser(client).post("/console/revocations", revoke, csrf: .some(browser.csrf))
            #expect(anonymous.status == .seeOther)
            #expect(try await Self.revocationCount(h) == 0)

            // The page's own form, with a Referer of this server instead of an Origin, goes through.
            let accepted = try await browser.post(
                "/console/revocations", revoke, origin: nil, extra: [.referer: "\(Self.ownOrigin)/console/access"])
            #expect(accepted.status == .seeOther)
            #expect(try await Self.revocationCount(h) == 1)
        }
    }

    // MARK: Fleet and devices

    @Test(
        "the fleet page counts the census's devices per contract and app version, the rollout gate counts who a higher floor refuses, and a device's page shows its syncs and queue",
        arguments: StorageKind.allCases)
    func fleetAndDevice(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            let alice = h.token(user: "alice", device: "alice-phone")
            let bob = h.token(user: "bob", device: "bob-tablet")
            let pulled = [
                try await client.execute(
                    uri: "/sync/v1/pull?scope=user", method: .get,
                    headers: FleetCensusTests.headers(
                        alice, app: "fieldops-ios/1.4.2", schema: "Task=1,Unit=3", telemetry: "outbox_pending=3,conflicts_open=1")),
                try await client.execute(
                    uri: "/sync/v1/pull?scope=user", method: .get,
                    headers: FleetCensusTests.headers(bob, app: "fieldops-android/1.3.0", schema: "Task=1,Unit=2")),
            ]
            #expect(pulled.allSatisfy { $0.status == .ok })
            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)

            let fleet = try await browser.get("/console")
            #expect(fleet.status == .ok)
            let text = fleet.bodyText
            #expect(text.contains("<li><span class=\"figure\">2</span> active</li>"), "\(text)")
            #expect(text.contains("<tr><th scope=\"row\">Unit</th><td>2</td><td>1</td><td>0</td></tr>"))
            #expect(text.contains("<tr><th scope=\"row\">fieldops-ios/1.4.2</th><td>1</td><td>0</td></tr>"))
            #expect(text.contains("<a href=\"/console/devices/alice/alice-phone\">alice-phone</a>"))
            #expect(!text.contains(">console<"), "the admin's own requests are not a device")

            let gate = try await browser.get("/console?active=7d&contract=Unit&oldest_supported=3")
            #expect(gate.bodyText.contains("1 active device would be refused and purge Unit (50.0 % of 2): above the 1 % gate."))
            let safe = try await browser.get("/console?contract=Unit&oldest_supported=2")
            #expect(safe.bodyText.contains("No active device would be refused"))
            #expect(try await browser.get("/console?active=soon").status == .badRequest)

            let device = try await browser.get("/console/devices/alice/alice-phone")
            #expect(device.status == .ok)
            #expect(device.bodyText.contains("<dt>App version</dt><dd>fieldops-ios/1.4.2</dd>"))
            #expect(device.bodyText.contains("<tr><th scope=\"row\">Outbox: writes waiting</th><td>3</td></tr>"))
            #expect(device.bodyText.contains("<td>pull</td><td>200</td><td>ok</td>"))
            #expect(device.bodyText.contains("action=\"/console/devices/alice/alice-phone/revoke\""))
            let token = try #require(browser.csrf)
            #expect(device.bodyText.components(separatedBy: "name=\"csrf\" value=\"\(token)\"").count == 3, "sign-out and revoke carry the token")
            #expect(try await browser.get("/console/devices/alice/nobody").status == .notFound)
        }
    }

    // MARK: Revoking and erasing

    @Test("revoking a device from its console page: its next request gets 401 token_revoked", arguments: StorageKind.allCases)
    func revokeThroughTheConsole(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            let before = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(h.ownerToken))
            #expect(before.status == .ok)
            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)
            let revoked = try await browser.post("/console/devices/alice/alice-phone/revoke")
            #expect(revoked.status == .seeOther)
            #expect(revoked.headers[.location] == "/console/devices/alice/alice-phone?done=revoked")
            let after = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(h.ownerToken))
            #expect(after.status == .unauthorized)
            #expect(try after.errorDetail.code == .tokenRevoked)
            let access = try await browser.get("/console/access")
            #expect(access.bodyText.contains("<td>device</td><td>alice-phone</td>"))

            // Revoking the admin's own device ends the session at its next request.
            let own = try await browser.post("/console/revocations", ["kind": "device", "subject": "console"])
            #expect(own.status == .seeOther)
            let ended = try await browser.get("/console")
            #expect(ended.status == .seeOther && ended.headers[.location] == "/console/sign-in?ended=revoked")
        }
    }

    @Test("an erasure shows what it erases and needs the user id typed again; then the user's device gets 410", arguments: StorageKind.allCases)
    func erasureNeedsConfirmation(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        // One token throughout: one issued after the erasure would rightly be a fresh start.
        let alice = h.ownerToken
        try await h.live { client in
            try await ChangeFeedTests.join(client, h)
            try await ChangeFeedTests.push(client, alice, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)

            let confirm = try await browser.get("/console/erasures/confirm?user=alice")
            #expect(confirm.status == .ok)
            #expect(confirm.bodyText.contains("Erase the data of user alice?"))
            #expect(confirm.bodyText.contains("<code>alice-phone</code>") && confirm.bodyText.contains("<code>team-1</code>"))
            #expect(confirm.bodyText.contains("name=\"confirm\""))
            let token = try #require(browser.csrf)
            #expect(confirm.bodyText.components(separatedBy: "name=\"csrf\" value=\"\(token)\"").count == 3, "sign-out and erase carry the token")

            for typed in ["", "alic", "bob"] {
                let wrong = try await browser.post("/console/erasures", ["user": "alice", "confirm": typed])
                #expect(wrong.status == .unprocessableContent)
                #expect(wrong.bodyText.contains("Nothing was erased"))
            }
            let stillThere = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(alice))
            #expect(stillThere.status == .ok, "nothing was erased")

            let own = try await browser.get("/console/erasures/confirm?user=admin")
            #expect(own.status == .badRequest && own.bodyText.contains("cannot erase its own user"))
            let nobody = try await browser.get("/console/erasures/confirm?user=nobody")
            #expect(nobody.status == .notFound)

            let erased = try await browser.post("/console/erasures", ["user": "alice", "confirm": "alice"])
            #expect(erased.status == .ok, "\(erased.bodyText)")
            #expect(erased.bodyText.contains("User alice erased"))
            let told = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(alice))
            #expect(told.status == .gone)
            let access = try await browser.get("/console/access")
            #expect(access.bodyText.contains("<td>alice</td>"))
        }
    }

    // MARK: What pages show

    @Test("a device id or client id holding <script> is shown escaped on the conflicts page", arguments: StorageKind.allCases)
    func escapesWhatDevicesSend(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            let hostile = h.token(user: "mallory", device: "<script>alert(1)</script>")
            let mutation = Mutation(
                seq: 1, clientMutationId: "cm-1", entity: "NoSuchContract", op: .create, id: "<img src=x onerror=alert(2)>",
                payload: .object(["id": .string("x")]))
            let pushed = try await client.push(
                PushRequest(clientId: "<script>alert(3)</script>", schema: [:], mutations: [mutation]), token: hostile)
            #expect(pushed.status == .ok, "\(pushed.bodyText)")
            #expect(try pushed.pushResults.first?.status == .rejected)

            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)
            let page = try await browser.get("/console/conflicts")
            #expect(page.status == .ok)
            let text = page.bodyText
            #expect(text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "the device id")
            #expect(text.contains("&lt;script&gt;alert(3)&lt;/script&gt;"), "the client id")
            #expect(text.contains("&lt;img src=x onerror=alert(2)&gt;"), "the row id")
            #expect(text.contains("unknown_entity"))
            #expect(!text.contains("<script>") && !text.contains("<img"))
            #expect(!text.contains(">nil<") && !text.contains("seq nil"), "absent values are left out, not written as nil")

            let fleet = try await browser.get("/console")
            #expect(fleet.bodyText.contains(">&lt;script&gt;alert(1)&lt;/script&gt;</a>"))
            #expect(fleet.bodyText.contains("href=\"/console/devices/mallory/%3Cscript%3Ealert(1)%3C%2Fscript%3E\""))
            #expect(!fleet.bodyText.contains("<script>"))
            let device = try await browser.get("/console/devices/mallory/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
            #expect(device.status == .ok)
            #expect(device.bodyText.contains("<h1>Device &lt;script&gt;alert(1)&lt;/script&gt;</h1>"))
            #expect(!device.bodyText.contains("<script>"))
        }
    }

    @Test("Verify runs the audit verification, shows its result and counts it in /metrics")
    func auditVerification() async throws {
        let h = try await Self.harness(.sqlite)
        try await h.live { client in
            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)
            let page = try await browser.get("/console/audit")
            #expect(page.bodyText.contains("No entry has been archived"))
            let verified = try await browser.post("/console/audit/verify")
            #expect(verified.status == .ok)
            #expect(verified.bodyText.contains("Audit log intact"))
            let metrics = try await client.execute(
                uri: "/metrics", method: .get, headers: [.authorization: "Bearer \(HostileHarness.metricsToken)"])
            #expect(metrics.bodyText.contains(#"outpost_audit_verifications_total{outcome="ok"} 1"#))
            #expect(metrics.bodyText.contains(#"outpost_audit_verifications_total{outcome="broken"} 0"#))
        }
    }

    @Test("the last hour's charts are inline SVG with a data table, and count the pushes and pulls just made")
    func activityCharts() async throws {
        let h = try await Self.harness(.sqlite)
        try await h.live { client in
            for _ in 0..<3 {
                _ = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(h.ownerToken))
            }
            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)
            let page = try await browser.get("/console/activity")
            #expect(page.status == .ok)
            #expect(page.bodyText.contains("<svg role=\"img\" aria-labelledby=\"pull-rate-title pull-rate-desc\""))
            #expect(page.bodyText.contains("<caption>Pull requests per minute, per minute (UTC)</caption>"))
            // The three pulls, whichever minutes they fell in.
            let table = page.bodyText.components(separatedBy: "<details id=\"pull-rate-data\">").last?.components(separatedBy: "</details>").first
            let counts = (table ?? "").components(separatedBy: "</th><td>").dropFirst().compactMap { Int($0.prefix { $0.isNumber }) }
            #expect(counts.count == 60 && counts.reduce(0, +) == 3, "\(counts)")
            let fragment = try await browser.get("/console/activity/charts")
            #expect(fragment.status == .ok && fragment.bodyText.hasPrefix("<section class=\"chart\""))
            let script = try await browser.get("/console/static/console.js")
            #expect(script.status == .ok && script.headers[.contentType]?.hasPrefix("text/javascript") == true)
        }
    }

    // MARK: Sessions

    /// The server's clock, moved by hand (it starts at the system's time, which tokens are issued at).
    final class ManualClock: ServerClock, @unchecked Sendable {
        private let lock = NSLock()
        private var milliseconds = Int64(Date().timeIntervalSince1970 * 1000)

        func now() -> Timestamp { lock.withLock { Timestamp(millisecondsSince1970: milliseconds) } }
        func advance(seconds: Int64) { lock.withLock { milliseconds += seconds * 1000 } }
    }

    @Test(
        "a session ends after 8 hours, or with its admin token if that expires first: the next page goes to sign in",
        arguments: StorageKind.allCases)
    func sessionExpiry(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        let clock = ManualClock()
        let environment = ServerEnvironment(storage: h.storage, signer: h.signer, clock: clock, apps: SampleServerApps.all)
        try await LoopbackServer.run(configuration: h.configuration, environment: environment) { server in
            var browser = Browser(server.client)
            let day = h.signer.token(tenant: HostileHarness.tenant, user: "admin", device: "console", isAdmin: true, lifetime: 86_400)
            let signedIn = try await browser.signIn(day)
            #expect(signedIn.headers[.setCookie]?.contains("Max-Age=28800;") == true)
            #expect(try await browser.get("/console").status == .ok)
            clock.advance(seconds: 8 * 3600 - 5)
            #expect(try await browser.get("/console").status == .ok)
            clock.advance(seconds: 10)
            let expired = try await browser.get("/console")
            #expect(expired.status == .seeOther && expired.headers[.location] == "/console/sign-in?ended=expired")

            // A token that expires within a minute opens a session of that minute.
            let now = clock.now().millisecondsSince1970 / 1000
            let short = h.signer.token(
                tenant: HostileHarness.tenant, user: "admin", device: "console", isAdmin: true, lifetime: 60, now: now)
            var second = Browser(server.client)
            let opened = try await second.signIn(short)
            #expect(opened.headers[.setCookie]?.contains("Max-Age=60;") == true)
            clock.advance(seconds: 61)
            #expect(try await second.get("/console").headers[.location] == "/console/sign-in?ended=expired")
        }
    }

    @Test("signing out deletes the session: the cookie is cleared and no longer opens a page", arguments: StorageKind.allCases)
    func signOut(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)
            let refused = try await browser.post("/console/sign-out", csrf: .some(nil))
            #expect(refused.status == .forbidden, "signing out needs the CSRF token too")
            let out = try await browser.post("/console/sign-out")
            #expect(out.status == .seeOther && out.headers[.location] == "/console/sign-in?ended=signed-out")
            #expect(out.headers[.setCookie]?.hasPrefix("outpost_console=; Path=/console; Max-Age=0;") == true)
            #expect(try await browser.get("/console").status == .seeOther)
            let stored = try await h.storage.read { try await $0.serverTableQuery("SELECT * FROM console_sessions", []) }
            #expect(stored.isEmpty)
        }
    }

    @Test("with the console off, /console is not served")
    func consoleOff() async throws {
        let h = try await Self.harness(.sqlite) { $0.console.isEnabled = false }
        try await h.live { client in
            let signIn = try await client.execute(uri: "/console/sign-in", method: .get)
            let overview = try await client.execute(uri: "/console", method: .get)
            #expect(signIn.status == .notFound && overview.status == .notFound)
        }
    }

    @Test("every template renders")
    func templatesRender() {
        for name in ConsoleTemplates.all.keys {
            #expect(ConsoleTemplates.library.render([String: Any](), withTemplate: name) != nil, "\(name)")
        }
    }
}

/// The console's last hour: a ring of one-minute buckets.
@Suite("Recent activity: the last hour, a minute at a time", .blockingWork)
struct RecentActivityTests {
    @Test("pushes and pulls land in their minute, p99 is the bound of the bucket it falls in, an hour-old slot is reused")
    func minutes() {
        let activity = RecentActivity()
        let start: Int64 = 1_800_000_000 - 1_800_000_000 % 60
        for milliseconds in [1, 2, 2, 3] + Array(repeating: 4, count: 95) + [900] {
            activity.recordRequest(route: "/sync/v1/push", nanoseconds: UInt64(milliseconds) * 1_000_000, at: start + 5)
        }
        activity.recordRequest(route: "/sync/v1/pull", nanoseconds: 20_000_000, at: start + 65)
        activity.recordRequest(route: "/health", nanoseconds: 1_000_000, at: start + 65)
        let hour = activity.lastHour(at: start + 90)
        #expect(hour.count == 60)
        #expect(hour.last?.start == start + 60)
        let first = hour[58]
        #expect(first.start == start && first.pushes == 100 && first.pulls == 0)
        #expect(first.pushP99Milliseconds == 5, "99 of 100 took 4 ms or less: the 5 ms bucket")
        #expect(first.pullP99Milliseconds == nil)
        #expect(hour[59].pulls == 1 && hour[59].pullP99Milliseconds == 20 && hour[59].pushes == 0)
        // An hour later the same slot holds the new minute only.
        activity.recordRequest(route: "/sync/v1/pull", nanoseconds: 1_000_000, at: start + 3600)
        let later = activity.lastHour(at: start + 3600)
        #expect(later.last?.pulls == 1 && later.last?.pushes == 0)
        #expect(!later.contains { $0.pushes > 0 }, "the first minute left the window")
    }

    @Test("live channels carry over minutes without a change, and each minute shows its most")
    func liveConnections() {
        let activity = RecentActivity()
        let start: Int64 = 1_800_000_000 - 1_800_000_000 % 60
        activity.recordLiveConnections(3, at: start)
        activity.recordLiveConnections(5, at: start + 10)
        activity.recordLiveConnections(2, at: start + 50)
        activity.recordLiveConnections(4, at: start + 300)
        let hour = activity.lastHour(at: start + 600)
        let byStart = Dictionary(uniqueKeysWithValues: hour.map { ($0.start, $0.liveConnections) })
        #expect(byStart[start] == 5)
        #expect(byStart[start + 60] == 2 && byStart[start + 240] == 2, "no change: as many as the minute before ended with")
        #expect(byStart[start + 300] == 4 && byStart[start + 600] == 4)
        #expect(byStart[start - 60] == 0, "before anything was recorded")
    }
}
