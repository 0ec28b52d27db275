import ContractRuntime
import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SampleServerApps
import SyncProtocol
import Testing

@testable import SyncServer

/// The operator console against round 4's attacks (issue 44): a session that outlived the key of
/// its admin token, sessions that could be neither listed nor ended nor counted, a cookie without
/// `Secure` over the server's own TLS, `//console` answered without the console's headers, and
/// U+0000 in a form field cut by storage into another id.
@Suite("Operator console: sessions, cookies, headers and forms under attack", .blockingWork)
struct ConsoleHardeningTests {
    typealias Browser = ConsoleTests.Browser

    static func harness(_ kind: StorageKind, configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> HostileHarness {
        try await HostileHarness.make(kind, configure: configure)
    }

    static func sessionRows(_ h: HostileHarness, tenant: String = HostileHarness.tenant) async throws -> [StoredRow] {
        try await h.storage.read { try await $0.serverTableQuery("SELECT * FROM console_sessions WHERE tenant = ?", [.text(tenant)]) }
    }

    static func revoked(_ h: HostileHarness) async throws -> [String] {
        try await h.storage.read { try await $0.revocations(tenant: HostileHarness.tenant).map(\.subject) }
    }

    // MARK: The key of the admin token

    /// A data folder's keys, as `serve` reads them (`keys rotate` and `keys retire` reach it).
    static func folderSigner(_ folder: URL) throws -> TokenSigner {
        try TokenKey.signer(secretFile: nil, dataDirectory: folder, environment: [:])
    }

    @Test(
        "retiring the key that signed the admin token ends its session at the next page, on a running server and across a restart; forms of it change nothing",
        arguments: StorageKind.allCases)
    func retiredKeyEndsTheSession(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        let keys = try TemporaryDirectory(prefix: "console-keys")
        let signer = try Self.folderSigner(keys.url)
        let oldKey = signer.keyID
        let admin = signer.token(tenant: HostileHarness.tenant, user: "admin", device: "console", isAdmin: true)
        let environment = ServerEnvironment(storage: h.storage, signer: signer, apps: SampleServerApps.all)

        // Signed in with the old key; a rotation keeps it accepted, so the session holds.
        let signedIn = try await LoopbackServer.run(configuration: h.configuration, environment: environment) { server in
            var browser = Browser(server.client)
            #expect(try await browser.signIn(admin).status == .seeOther)
            #expect(try await browser.get("/console").status == .ok)
            let newKey = try TokenKey.rotate(dataDirectory: keys.url)
            #expect(newKey != oldKey)
            try await Task.sleep(for: .milliseconds(2100))  // the key folder's check interval
            #expect(try await browser.get("/console").status == .ok, "a rotated, not retired, key still holds")
            return browser
        }
        let stored = try await Self.sessionRows(h)
        #expect(stored.count == 1 && stored.first?.text("key_id") == oldKey, "the session records its token's kid")

        // Across a restart with the same keys, the stored session holds.
        let restarted = ServerEnvironment(storage: h.storage, signer: try Self.folderSigner(keys.url), apps: SampleServerApps.all)
        try await LoopbackServer.run(configuration: h.configuration, environment: restarted) { server in
            var browser = Browser(server.client)
            browser.cookie = signedIn.cookie
            browser.csrf = signedIn.csrf
            #expect(try await browser.get("/console").status == .ok)

            // Retired while the server runs: the next page ends the session.
            try TokenKey.retire(kid: oldKey, dataDirectory: keys.url)
            try await Task.sleep(for: .milliseconds(2100))
            let revoke = try await browser.post("/console/revocations", ["kind": "device", "subject": "alice-phone"])
            #expect(revoke.status == .seeOther && revoke.headers[.location] == "/console/sign-in?ended=key-retired")
            #expect(try await Self.revoked(h).isEmpty, "the form of a session whose key is retired changes nothing")
            let page = try await browser.get("/console")
            #expect(page.status == .seeOther && page.headers[.location]?.hasPrefix("/console/sign-in") == true)
            #expect(try await Self.sessionRows(h).isEmpty, "the session is deleted")
            let form = try await browser.get("/console/sign-in?ended=key-retired")
            #expect(form.bodyText.contains("the key that signed its admin token was retired"))
        }

        // A session opened before the retirement, read by a server started after it: refused.
        let second = try await LoopbackServer.run(
            configuration: h.configuration, environment: ServerEnvironment(storage: h.storage, signer: signer, apps: [])
        ) { server in
            var browser = Browser(server.client)
            // The old key is gone from the folder: sign in with a token of the current key, and
            // plant a session of the retired one as an earlier process would have left it.
            let current = try Self.folderSigner(keys.url)
            #expect(
                try await browser.signIn(current.token(tenant: HostileHarness.tenant, user: "admin", device: "console", isAdmin: true)).status
                    == .seeOther)
            return browser
        }
        _ = try await h.storage.write { transaction in
            try await transaction.serverTableQuery("UPDATE console_sessions SET key_id = ? RETURNING id_sha256", [.text(oldKey)])
        }
        let afterRestart = ServerEnvironment(storage: h.storage, signer: try Self.folderSigner(keys.url), apps: [])
        try await LoopbackServer.run(configuration: h.configuration, environment: afterRestart) { server in
            var browser = Browser(server.client)
            browser.cookie = second.cookie
            let page = try await browser.get("/console")
            #expect(page.status == .seeOther && page.headers[.location] == "/console/sign-in?ended=key-retired")
        }
    }

    @Test("revoking the admin's user, or erasing it, ends its session at the next page", arguments: StorageKind.allCases)
    func revokedOrErasedUserEndsTheSession(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            let root = h.token(user: "root", device: "root-laptop", admin: true)
            var revokedUser = Browser(client)
            _ = try await revokedUser.signIn(h.token(user: "ops", device: "ops-laptop", admin: true))
            var erasedUser = Browser(client)
            _ = try await erasedUser.signIn(h.token(user: "temp", device: "temp-laptop", admin: true))
            #expect(try await revokedUser.get("/console").status == .ok)
            #expect(try await erasedUser.get("/console").status == .ok)

            let revoked = try await client.execute(
                uri: "/admin/v1/revocations", method: .post, headers: HostileHarness.headers(root, [.contentType: "application/json"]),
                body: ByteBuffer(string: #"{"user": "ops"}"#))
            #expect(revoked.status == .ok)
            // The erased admin holds something to erase: a team membership.
            let joined = try await client.execute(uri: "/admin/v1/teams/team-1/members/temp", method: .put, headers: HostileHarness.headers(root))
            #expect(joined.status == .ok || joined.status == .noContent, "\(joined.status)")
            let erased = try await client.execute(uri: "/admin/v1/users/temp", method: .delete, headers: HostileHarness.headers(root))
            #expect(erased.status == .ok, "\(erased.bodyText)")
            for browser in [revokedUser, erasedUser] {
                let page = try await browser.get("/console/sessions")
                #expect(page.status == .seeOther && page.headers[.location] == "/console/sign-in?ended=revoked")
            }
        }
    }

    // MARK: The Sessions page

    @Test(
        "the Sessions page lists the tenant's sessions (opened, expires, who, kid; never an id or another's CSRF token) and ends one; ending one's own signs out",
        arguments: StorageKind.allCases)
    func sessionsPage(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        try await h.live { client in
            var mine = Browser(client)
            _ = try await mine.signIn(h.adminToken)
            var theirs = Browser(client)
            _ = try await theirs.signIn(h.token(user: "root", device: "root-laptop", admin: true))
            var elsewhere = Browser(client)
            _ = try await elsewhere.signIn(
                h.signer.token(tenant: "other", user: "admin", device: "other-console", isAdmin: true))

            let page = try await mine.get("/console/sessions")
            #expect(page.status == .ok)
            let text = page.bodyText
            #expect(text.contains("<h1>Sessions</h1>") && text.contains("aria-current=\"page\">Sessions</a>"))
            #expect(text.contains("<caption>2 open console sessions of tenant acme</caption>"), "\(text)")
            #expect(text.contains("root-laptop") && text.contains("admin (this session)"))
            #expect(text.contains("<code>\(h.signer.keyID)</code>"), "the kid of each session's token")
            #expect(!text.contains("other-console"), "another tenant's sessions are not listed")
            for secret in [mine.cookie, theirs.cookie, theirs.csrf, elsewhere.cookie].compactMap({ $0 }) {
                #expect(!text.contains(secret), "no session id, and no other session's CSRF token")
            }
            let rows = try await Self.sessionRows(h)
            for digest in rows.compactMap({ $0.text("id_sha256") }) { #expect(!text.contains(digest), "not even an id's digest") }

            // Another tenant's admin cannot end this tenant's session by its handle.
            let theirHandle = try #require(rows.first { $0.text("user_id") == "root" }?.text("handle"))
            let crossTenant = try await elsewhere.post("/console/sessions/end", ["session": theirHandle])
            #expect(crossTenant.status == .notFound && crossTenant.bodyText.contains("Nothing was changed"))
            #expect(try await theirs.get("/console").status == .ok)

            // Ending another admin's session: its next page goes to sign in.
            let ended = try await mine.post("/console/sessions/end", ["session": theirHandle])
            #expect(ended.status == .seeOther && ended.headers[.location] == "/console/sessions?done=ended")
            #expect(try await theirs.get("/console").headers[.location] == "/console/sign-in?ended=expired")
            let again = try await mine.post("/console/sessions/end", ["session": theirHandle])
            #expect(again.status == .notFound && again.bodyText.contains("Nothing was changed"))

            // Ending one's own is signing out.
            let ownHandle = try #require(try await Self.sessionRows(h).first?.text("handle"))
            let out = try await mine.post("/console/sessions/end", ["session": ownHandle])
            #expect(out.status == .seeOther && out.headers[.location] == "/console/sign-in?ended=signed-out")
            #expect(out.headers[.setCookie]?.hasPrefix("outpost_console=; Path=/console; Max-Age=0;") == true)
            #expect(try await mine.get("/console").status == .seeOther)
            #expect(try await Self.sessionRows(h).isEmpty)
            #expect(try await Self.sessionRows(h, tenant: "other").count == 1, "the other tenant's session holds")
        }
    }

    @Test(
        "a tenant keeps at most consoleSessionsPerTenant sessions: signing in past it ends its oldest, never another tenant's",
        arguments: StorageKind.allCases)
    func sessionsPerTenantAreCapped(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind) { $0.identityLimits.consoleSessionsPerTenant = 3 }
        try await h.live { client in
            var other = Browser(client)
            _ = try await other.signIn(h.signer.token(tenant: "other", user: "admin", device: "other-console", isAdmin: true))
            var browsers: [Browser] = []
            for index in 0..<8 {
                var browser = Browser(client)
                #expect(try await browser.signIn(h.adminToken).status == .seeOther)
                browsers.append(browser)
                if index < 3 { try await Task.sleep(for: .milliseconds(1100)) }  // opened in distinct seconds: an order to keep
            }
            #expect(try await Self.sessionRows(h).count == 3, "the cap holds")
            #expect(try await Self.sessionRows(h, tenant: "other").count == 1)
            #expect(try await browsers[0].get("/console").headers[.location] == "/console/sign-in?ended=expired", "the oldest ended")
            #expect(try await browsers[7].get("/console").status == .ok, "the newest holds")
            #expect(try await other.get("/console").status == .ok, "another tenant's session holds")
            let page = try await browsers[7].get("/console/sessions")
            #expect(page.bodyText.contains("<caption>3 open console sessions of tenant acme</caption>"))
        }
    }

    // MARK: The cookie over the server's own TLS

    @Test("with the server's own TLS and no --public-url, the session cookie is Secure")
    func secureCookieOverOwnTLS() async throws {
        let h = try await Self.harness(.sqlite)
        for tls in [true, false] {
            var configuration = h.configuration
            if tls {
                // The router alone: the files are read by the application that serves them, not here.
                configuration.tls = TLSFiles(
                    certificateChain: URL(fileURLWithPath: "/nonexistent/cert.pem"), privateKey: URL(fileURLWithPath: "/nonexistent/key.pem"))
            }
            #expect(configuration.publicBaseURL == nil)
            let environment = ServerEnvironment(storage: h.storage, signer: h.signer, apps: SampleServerApps.all)
            let router = buildRouter(configuration: configuration, environment: environment).router
            try await Application(router: router).test(.router) { client in
                let response = try await Browser(client).post("/console/sign-in", ["token": h.adminToken], csrf: .some(nil), origin: nil)
                #expect(response.status == .seeOther)
                #expect(response.headers[.setCookie]?.hasSuffix("; Secure") == tls, "tls: \(tls)")
            }
        }
    }

    // MARK: Headers on every spelling of the console

    @Test("every answer the router gives under the console, whatever the path's spelling, carries its CSP and frame headers")
    func headersOnEverySpelling() async throws {
        let h = try await Self.harness(.sqlite)
        try await h.live { client in
            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)
            let spellings = [
                "/console", "//console", "/console/", "//console/", "///console//audit", "//console/sign-in", "/console//sign-in",
                "//console/fleet", "/console/no-such-page", "//console/static/nothing.css", "/console/static/console.css",
            ]
            for path in spellings {
                for cookie in [browser.cookie, nil] {
                    var headers: HTTPFields = [:]
                    if let cookie { headers[.cookie] = "outpost_console=\(cookie)" }
                    let response = try await client.execute(uri: path, method: .get, headers: headers)
                    #expect(response.headers[.contentSecurityPolicy] == SecurityHeadersMiddleware.consolePolicy, "\(path): \(response.status)")
                    #expect(response.headers[.xFrameOptions] == "DENY", "\(path)")
                    #expect(response.headers[.referrerPolicy] == "same-origin", "\(path)")
                    #expect(response.headers[.cacheControl] != nil, "\(path)")
                }
            }
            let posted = try await client.execute(
                uri: "//console/sign-in", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(posted.headers[.contentSecurityPolicy] == SecurityHeadersMiddleware.consolePolicy)
            for path in ["/health", "/consoles", "/sync/v1/pull"] {
                let response = try await client.execute(uri: path, method: .get)
                #expect(response.headers[.contentSecurityPolicy] == nil, "\(path) is not the console")
                #expect(response.headers[.xContentTypeOptions] == "nosniff", "\(path)")
            }
        }
        for (path, console) in [("//console", true), ("/CONSOLE/x", true), ("/console2", false), ("/", false), ("", false)] {
            #expect(SecurityHeadersMiddleware.isConsolePath(path) == console, "\(path)")
        }
    }

    // MARK: Form fields

    @Test(
        "a console form field holding U+0000, a control character, a non-NFC or an over-long id, or a form that does not read, is refused with a page and changes nothing",
        arguments: StorageKind.allCases)
    func hostileFormFields(_ kind: StorageKind) async throws {
        let h = try await Self.harness(kind)
        let alice = h.ownerToken
        try await h.live { client in
            try await ChangeFeedTests.join(client, h)
            try await ChangeFeedTests.push(client, alice, client: "alice-phone", [ChangeFeedTests.task(1, "task-1")])
            var browser = Browser(client)
            _ = try await browser.signIn(h.adminToken)
            let audit = try await h.auditCount()

            // The round-4 attack: `d-nul2%00x` revoked `d-nul2`.
            let nul = try await browser.post("/console/revocations", ["kind": "device", "subject": "d-nul2\u{0}x"])
            #expect(nul.status == .badRequest, "\(nul.status)")
            #expect(nul.bodyText.contains("U+0000") && nul.bodyText.contains("Nothing was changed"))
            #expect(nul.headers[.contentType]?.hasPrefix("text/html") == true)
            for subject in ["alice-phone\u{7}", "jose\u{301}", String(repeating: "d", count: 257), "alice\u{0}", "\u{0}"] {
                for kind in ["device", "user"] {
                    let refused = try await browser.post("/console/revocations", ["kind": kind, "subject": subject])
                    #expect(refused.status == .badRequest, "\(kind) \(subject.unicodeScalars.map(\.value))")
                }
            }
            let badKind = try await browser.post("/console/revocations", ["kind": "device\u{0}", "subject": "alice-phone"])
            #expect(badKind.status == .badRequest)
            #expect(try await Self.revoked(h).isEmpty, "nothing revoked")

            // A path naming a device with U+0000 never reaches the revocation.
            let path = try await browser.post("/console/devices/alice/d-nul2%00x/revoke")
            #expect(path.status == .badRequest)
            #expect(try await Self.revoked(h).isEmpty)

            // Erasure: the user id, typed and confirmed, with U+0000 after it.
            for user in ["alice\u{0}x", "alice\u{0}", "alice\u{1}"] {
                let erase = try await browser.post("/console/erasures", ["user": user, "confirm": user])
                #expect(erase.status == .badRequest && erase.bodyText.contains("Nothing was changed"))
            }
            let confirm = try await browser.get("/console/erasures/confirm?user=alice%00x")
            #expect(confirm.status == .badRequest)
            let pulled = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(alice))
            #expect(pulled.status == .ok, "alice is not erased")

            // Forms that do not read are refused whole, whatever they hold.
            let csrf = try #require(browser.csrf)
            for body in [
                "csrf=\(csrf)&kind=device&subject=alice-phone%ZZ", "csrf=\(csrf)&kind=device&subject=alice-phone&subject=x",
                "csrf=\(csrf)&kind=device&subject=%FF%FE", "csrf=\(csrf)&kind=device&subject=alice-phone" + String(repeating: "&a=b", count: 20),
            ] {
                let response = try await client.execute(
                    uri: "/console/revocations", method: .post,
                    headers: [
                        .cookie: "outpost_console=\(browser.cookie ?? "")", .contentType: "application/x-www-form-urlencoded",
                        .origin: ConsoleTests.ownOrigin,
                    ],
                    body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.bodyText.contains("the form could not be read") || response.bodyText.contains("Refused"), "\(body)")
            }
            var raw = ByteBuffer(string: "csrf=\(csrf)&kind=device&subject=alice-phone")
            raw.writeBytes([0xFF])
            let invalid = try await client.execute(
                uri: "/console/revocations", method: .post,
                headers: [
                    .cookie: "outpost_console=\(browser.cookie ?? "")", .contentType: "application/x-www-form-urlencoded",
                    .origin: ConsoleTests.ownOrigin,
                ],
                body: raw)
            #expect(invalid.status == .badRequest)
            #expect(try await Self.revoked(h).isEmpty)

            // The CSRF token: only the session's, well formed.
            for token in [csrf + "\u{0}", "\u{0}", String(csrf.dropLast()) + "\u{0}", csrf + "x"] {
                let refused = try await browser.post("/console/revocations", ["kind": "device", "subject": "alice-phone"], csrf: .some(token))
                #expect(refused.status == .forbidden)
            }
            // The session to end: a handle, 32 hex digits.
            for handle in ["", "x\u{0}", String(repeating: "g", count: 32), String(repeating: "a", count: 33)] {
                let refused = try await browser.post("/console/sessions/end", ["session": handle])
                #expect(refused.status == .badRequest && refused.bodyText.contains("Nothing was changed"), "\(handle)")
            }
            #expect(try await Self.sessionRows(h).count == 1)
            #expect(try await Self.revoked(h).isEmpty)
            #expect(try await h.auditCount() == audit, "nothing was written")

            // A cookie holding U+0000 or anything but a session id opens nothing.
            for cookie in ["\(browser.cookie ?? "")%00", "x\u{0}"] {
                let response = try await client.execute(uri: "/console", method: .get, headers: [.cookie: "outpost_console=\(cookie)"])
                #expect(response.status == .seeOther)
            }
        }
    }
}
