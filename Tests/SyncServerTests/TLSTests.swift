import Foundation
import OutpostTestSupport
import Testing

/// `sync-server serve --tls-cert --tls-key` and `sync-device login --pin-sha256`, as processes,
/// with a throwaway CA made by `openssl` for each test.
@Suite("TLS", .blockingWork)
struct TLSTests {
    static let tenant = "demo"
    static let team = "team-1"

    @Test("a pinned device pushes and pulls over HTTPS; another device pulls what it pushed")
    func syncOverTLS() throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls")
        let ca = try ThrowawayCA(in: folder.url)
        let server = try ca.startServer(in: folder.url)
        defer { try? server.stop() }

        let ana = try PinnedDevice("ana", in: folder.url, ca: ca)
        try ana.ok([
            "login", "--server", "https://localhost:\(try #require(server.port))", "--token", try token(server, "op-ana"), "--pin-sha256", ca.leafPin,
        ])
        try ana.ok(["create", "service-asset", "--field", "asset_tag=TLS-1", "--field", "display_name=Over TLS", "--field", "category=tool"])
        let pushed = try ana.ok(["sync"])
        #expect(pushed.stdout.contains("pushed 1 (1 applied)"), "\(pushed)")

        let ben = try PinnedDevice("ben", in: folder.url, ca: ca)
        // The CA's key as the pin: a pin on any certificate of the chain passes.
        try ben.ok([
            "login", "--server", "https://127.0.0.1:\(try #require(server.port))", "--token", try token(server, "op-ben"), "--pin-sha256", ca.caPin,
        ])
        try ben.ok(["sync"])
        let rows = try ben.ok(["rows", "service-asset"])
        #expect(rows.stdout.contains("TLS-1"), "\(rows)")
    }

    @Test("a device without a pin trusts only the system's roots: the throwaway CA's server is refused")
    func systemRootsByDefault() throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls")
        let ca = try ThrowawayCA(in: folder.url)
        let server = try ca.startServer(in: folder.url)
        defer { try? server.stop() }
        let device = try PinnedDevice("plain", in: folder.url, ca: nil)
        try device.ok(["login", "--server", "https://localhost:\(try #require(server.port))", "--token", try token(server, "op-ana")])
        let sync = try device.run(["sync"])
        #expect(sync.status != 0, "\(sync)")
        #expect(sync.stdout.lowercased().contains("certificate") || sync.stderr.lowercased().contains("certificate"), "\(sync)")
    }

    @Test("a wrong pin is refused with both pins named, before anything is sent or stored")
    func wrongPinRefused() throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls")
        let ca = try ThrowawayCA(in: folder.url)
        let server = try ca.startServer(in: folder.url)
        defer { try? server.stop() }
        let wrongPin = Data(repeating: 7, count: 32).base64EncodedString()

        // At login: refused, and the home folder is not a device.
        let device = try PinnedDevice("wrong", in: folder.url, ca: ca)
        let login = try device.run(
            ["login", "--server", "https://localhost:\(try #require(server.port))", "--token", try token(server, "op-ana"), "--pin-sha256", wrongPin])
        #expect(login.status == 3, "\(login)")
        #expect(login.stderr.contains("does not match the pinned public keys"), "\(login)")
        #expect(login.stderr.contains(wrongPin), "the expected pin is named: \(login)")
        #expect(login.stderr.contains(ca.leafPin), "the served key's pin is named: \(login)")
        #expect(!FileManager.default.fileExists(atPath: device.home.appendingPathComponent("device.json").path))

        // At sync: the server's key replaced by one outside the pins (reloaded without a
        // restart); the queued change is not sent.
        try device.ok([
            "login", "--server", "https://localhost:\(try #require(server.port))", "--token", try token(server, "op-ana"), "--pin-sha256", ca.leafPin,
        ])
        try device.ok(["create", "service-asset", "--field", "asset_tag=NEVER-SENT", "--field", "display_name=No", "--field", "category=tool"])
        let replaced = try ca.issueLeaf(named: "other", serial: 2002)
        try ca.install(replaced)
        try waitForServedSerial(2002, port: try #require(server.port))
        let sync = try device.run(["sync"])
        #expect(sync.status == 3, "\(sync)")
        #expect(sync.stdout.contains("sync failed: the server's certificate does not match the pinned public keys"), "\(sync)")
        #expect(sync.stdout.contains(try ca.pin(ofCertificate: replaced.certificate)), "the served key's pin is named: \(sync)")
        #expect(sync.stdout.contains("1 change waiting"), "\(sync)")
        #expect(!server.log.contains("/sync/v1/push"), "no push reached the server:\n\(server.log)")
    }

    @Test("a pinned device's live channel runs over TLS through its pins: watching, it pulls what another device pushes")
    func liveChannelOverTLS() throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls")
        let ca = try ThrowawayCA(in: folder.url)
        let server = try ca.startServer(in: folder.url)
        defer { try? server.stop() }
        let port = try #require(server.port)

        let ana = try PinnedDevice("ana", in: folder.url, ca: ca)
        try ana.ok(["login", "--server", "https://localhost:\(port)", "--token", try token(server, "op-ana"), "--pin-sha256", ca.leafPin])
        let ben = try PinnedDevice("ben", in: folder.url, ca: ca)
        try ben.ok(["login", "--server", "https://localhost:\(port)", "--token", try token(server, "op-ben"), "--pin-sha256", ca.caPin])
        // The seeded rows first, so the only rows `watch` counts are the pushed one.
        try ben.ok(["sync"])

        let watching = try ben.start(["watch", "--changes", "1", "--seconds", "60"])
        defer { watching.signal(SIGKILL) }
        #expect(try watching.poll(timeout: 30) { watching.stdout.contains("live: connected") }, "\(watching.stdout)\(watching.stderr)")
        // Let the catch-up sync that follows `hello` finish first, so the row can only come from
        // a poke on the channel (the timer would take 15 minutes).
        usleep(1_000_000)
        try ana.ok(["create", "service-asset", "--field", "asset_tag=LIVE-1", "--field", "display_name=Live", "--field", "category=tool"])
        try ana.ok(["sync"])
        let result = try watching.wait(timeout: 30)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("pulled 1 ServiceAsset"), "\(result)")
        let rows = try ben.ok(["rows", "service-asset"])
        #expect(rows.stdout.contains("LIVE-1"), "\(rows)")
        // What makes the wrong-pin test's "no live request reached the server" mean something.
        #expect(server.log.contains("/sync/v1/live"), "the server logged the live channel:\n\(server.log)")
    }

    @Test("a wrong pin refuses the live channel too, with the pin mismatch, before the request is written")
    func wrongPinRefusesLiveChannel() throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls")
        let ca = try ThrowawayCA(in: folder.url)
        let server = try ca.startServer(in: folder.url)
        defer { try? server.stop() }
        let port = try #require(server.port)
        let device = try PinnedDevice("watcher", in: folder.url, ca: ca)
        try device.ok(["login", "--server", "https://localhost:\(port)", "--token", try token(server, "op-ana"), "--pin-sha256", ca.leafPin])

        let replaced = try ca.issueLeaf(named: "other", serial: 4004)
        try ca.install(replaced)
        try waitForServedSerial(4004, port: port)
        let watch = try device.run(["watch", "--seconds", "3"])
        #expect(watch.status == 3, "\(watch)")
        #expect(watch.stderr.contains("does not match the pinned public keys"), "\(watch)")
        #expect(watch.stderr.contains(try ca.pin(ofCertificate: replaced.certificate)), "the served key's pin is named: \(watch)")
        #expect(!watch.stdout.contains("live: connected"), "\(watch)")
        #expect(!server.log.contains("/sync/v1/live"), "no live request reached the server:\n\(server.log)")
    }

    @Test("ALPN: a client offering h2 gets HTTP/2, an HTTP/1.1 client still gets HTTP/1.1")
    func http2WhenOffered() throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls")
        let ca = try ThrowawayCA(in: folder.url)
        let server = try ca.startServer(in: folder.url)
        defer { try? server.stop() }
        let url = "https://localhost:\(try #require(server.port))/health"
        let h2 = try ChildProcess.run(tool: "curl", ["--http2", "-sS", "--cacert", ca.caFile.path, "-o", "/dev/null", "-w", "%{http_version}", url])
        #expect(h2.status == 0 && h2.stdout == "2", "\(h2)")
        let h1 = try ChildProcess.run(
            tool: "curl", ["--http1.1", "-sS", "--cacert", ca.caFile.path, "-o", "/dev/null", "-w", "%{http_version}", url])
        #expect(h1.status == 0 && h1.stdout == "1.1", "\(h1)")
        let plain = try ChildProcess.run(tool: "curl", ["-sS", "-o", "/dev/null", "http://localhost:\(try #require(server.port))/health"])
        #expect(plain.status != 0, "plain HTTP is not served on a TLS port: \(plain)")
    }

    @Test("replaced certificate files serve new connections without a restart; a broken pair is logged and the old one kept")
    func reloadWithoutRestart() throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls")
        let ca = try ThrowawayCA(in: folder.url)
        let server = try ca.startServer(in: folder.url)
        defer { try? server.stop() }
        let port = try #require(server.port)
        #expect(try servedSerial(port: port) == 1001)

        try ca.install(try ca.issueLeaf(named: "second", serial: 1002))
        try waitForServedSerial(1002, port: port)

        // A key that is not the certificate's: refused, the second certificate keeps serving.
        let third = try ca.issueLeaf(named: "third", serial: 1003)
        let fourth = try ca.issueLeaf(named: "fourth", serial: 1004)
        try ca.install(ThrowawayCA.Leaf(certificate: third.certificate, key: fourth.key))
        #expect(try server.waitForError(containing: "TLS certificate not reloaded", timeout: 20), "\(server.log)")
        #expect(server.log.contains(ca.keyFile.path), "the message names the key file: \(server.log)")
        #expect(try servedSerial(port: port) == 1002)
        #expect(server.isRunning)
    }

    @Test("a missing, unreadable or mismatched certificate or key at start is a clear error naming the file")
    func badFilesAtStart() throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls")
        let ca = try ThrowawayCA(in: folder.url)
        let other = try ca.issueLeaf(named: "other", serial: 3003)
        let data = folder.url.appendingPathComponent("data").path
        let missing = folder.url.appendingPathComponent("missing.pem").path
        let garbage = folder.url.appendingPathComponent("garbage.pem")
        try Data("not a certificate".utf8).write(to: garbage)

        func serve(_ options: [String]) throws -> CommandResult {
            try SyncServerCommand.run(["serve", "--data", data, "--port", "0"] + options, timeout: 60)
        }
        let cases: [(options: [String], named: String)] = [
            (["--tls-cert", missing, "--tls-key", ca.keyFile.path], missing),
            (["--tls-cert", ca.certificateFile.path, "--tls-key", missing], missing),
            (["--tls-cert", garbage.path, "--tls-key", ca.keyFile.path], garbage.path),
            (["--tls-cert", ca.certificateFile.path, "--tls-key", other.key.path], other.key.path),
        ]
        for (options, named) in cases {
            let result = try serve(options)
            #expect(result.status == 2, "\(result)")
            #expect(result.stderr.contains("error: ") && result.stderr.contains(named), "\(result)")
            #expect(!result.stdout.contains("listening"), "\(result)")
        }
        let alone = try serve(["--tls-cert", ca.certificateFile.path])
        #expect(alone.status == 64 && alone.stderr.contains("--tls-cert and --tls-key go together"), "\(alone)")
    }

    @Test("without --public-url, the asset links a TLS server hands out are https to the address reached, and download over it")
    func assetLinksOverTLS() throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls")
        let ca = try ThrowawayCA(in: folder.url)
        let server = try ca.startServer(in: folder.url)
        defer { try? server.stop() }
        let port = try #require(server.port)
        let token = try token(server, "op-links")

        let units = try ChildProcess.run(
            tool: "curl",
            [
                "-sS", "--fail", "--cacert", ca.caFile.path, "-H", "Authorization: Bearer \(token)",
                "https://127.0.0.1:\(port)/api/v1/content/units/sync",
            ])
        #expect(units.status == 0, "\(units)")
        let links = Self.values(of: "download_url", in: try JSONSerialization.jsonObject(with: Data(units.stdout.utf8)))
        #expect(!links.isEmpty, "\(units.stdout)")
        #expect(links.allSatisfy { $0.hasPrefix("https://127.0.0.1:\(port)/assets/") }, "\(links)")

        let link = try #require(links.first)
        let file = try ChildProcess.run(
            tool: "curl",
            ["-sS", "--fail", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", ca.caFile.path, "-H", "Authorization: Bearer \(token)", link])
        #expect(file.stdout == "200", "\(file)")
    }

    /// Every string under `key`, at any depth of a JSON value.
    private static func values(of key: String, in json: Any) -> [String] {
        if let object = json as? [String: Any] {
            return object.flatMap { name, value in
                name == key ? [value as? String].compactMap { $0 } : values(of: key, in: value)
            }
        }
        if let array = json as? [Any] { return array.flatMap { values(of: key, in: $0) } }
        return []
    }

    // MARK: Helpers

    private func token(_ server: SyncServerProcess, _ user: String) throws -> String {
        let result = try server.command([
            "token", "--data", server.data.path, "--tenant", Self.tenant, "--user", user, "--device", "\(user)-tablet", "--team", Self.team,
        ])
        guard result.status == 0 else { throw SyncServerProcess.Failure("no token: \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The serial number of the certificate a new connection to `port` is served.
    private func servedSerial(port: Int) throws -> Int? {
        let result = try ChildProcess.run(
            tool: "sh",
            [
                "-c",
                "openssl s_client -connect 127.0.0.1:\(port) -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -serial",
            ])
        guard let hex = result.stdout.split(separator: "=").last?.trimmingCharacters(in: .whitespacesAndNewlines) else { return nil }
        return Int(hex, radix: 16)
    }

    private func waitForServedSerial(_ serial: Int, port: Int) throws {
        let deadline = Date().addingTimeInterval(20)
        while try servedSerial(port: port) != serial {
            guard Date() < deadline else { throw SyncServerProcess.Failure("the server still serves another certificate than \(serial)") }
            usleep(200_000)
        }
    }
}

/// A CA made for one test, and the leaf certificates it issues for `localhost` and `127.0.0.1`.
struct ThrowawayCA {
    struct Leaf {
        var certificate: URL
        var key: URL
    }

    let folder: URL
    let caFile: URL
    let caKey: URL
    /// The files the server is started with (`install` replaces them).
    let certificateFile: URL
    let keyFile: URL
    let leafPin: String
    let caPin: String

    init(in parent: URL) throws {
        folder = parent.appendingPathComponent("pki", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        caFile = folder.appendingPathComponent("ca.pem")
        caKey = folder.appendingPathComponent("ca.key")
        try Self.openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", caKey.path, "-out", caFile.path,
            "-days", "2", "-subj", "/CN=Outpost Throwaway Test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ])
        certificateFile = folder.appendingPathComponent("server.pem")
        keyFile = folder.appendingPathComponent("server.key")
        let first = try Self.issue(in: folder, caFile: caFile, caKey: caKey, named: "first", serial: 1001)
        try FileManager.default.copyItem(at: first.certificate, to: certificateFile)
        try FileManager.default.copyItem(at: first.key, to: keyFile)
        leafPin = try Self.pin(ofCertificate: first.certificate)
        caPin = try Self.pin(ofCertificate: caFile)
    }

    func issueLeaf(named name: String, serial: Int) throws -> Leaf {
        try Self.issue(in: folder, caFile: caFile, caKey: caKey, named: name, serial: serial)
    }

    /// Replaces the server's files as a deployment would: each written beside and renamed over.
    func install(_ leaf: Leaf) throws {
        for (source, target) in [(leaf.key, keyFile), (leaf.certificate, certificateFile)] {
            let staged = target.appendingPathExtension("new")
            try? FileManager.default.removeItem(at: staged)
            try FileManager.default.copyItem(at: source, to: staged)
            guard rename(staged.path, target.path) == 0 else { throw SyncServerProcess.Failure("cannot rename \(staged.path)") }
        }
    }

    func pin(ofCertificate file: URL) throws -> String { try Self.pin(ofCertificate: file) }

    func startServer(in parent: URL) throws -> SyncServerProcess {
        let data = parent.appendingPathComponent("data", isDirectory: true)
        let server = SyncServerProcess(data: data, serveOptions: ["--tls-cert", certificateFile.path, "--tls-key", keyFile.path])
        // Requests are logged at info: the tests read the log to see which routes were reached
        // (`make test` runs with LOG_LEVEL=warning).
        try server.start(environment: ["LOG_LEVEL": "info"])
        let seeded = try server.command(["seed", "--data", data.path, "--tenant", TLSTests.tenant, "--team", TLSTests.team])
        guard seeded.status == 0 else { throw SyncServerProcess.Failure("seeding failed: \(seeded)") }
        return server
    }

    private static func issue(in folder: URL, caFile: URL, caKey: URL, named name: String, serial: Int) throws -> Leaf {
        let key = folder.appendingPathComponent("\(name).key")
        let request = folder.appendingPathComponent("\(name).csr")
        let certificate = folder.appendingPathComponent("\(name).pem")
        let extensions = folder.appendingPathComponent("\(name).ext")
        try Data(
            """
            subjectAltName=DNS:localhost,IP:127.0.0.1
            basicConstraints=CA:FALSE
            keyUsage=critical,digitalSignature
            extendedKeyUsage=serverAuth

            """.utf8
        ).write(to: extensions)
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key.path, "-out", request.path, "-subj",
            "/CN=localhost",
        ])
        try openssl([
            "x509", "-req", "-in", request.path, "-CA", caFile.path, "-CAkey", caKey.path, "-set_serial", String(serial), "-days", "2", "-out",
            certificate.path, "-extfile", extensions.path,
        ])
        return Leaf(certificate: certificate, key: key)
    }

    /// `pin-sha256` of a certificate's key, as the runbook of docs/security.md prints it.
    private static func pin(ofCertificate file: URL) throws -> String {
        let result = try ChildProcess.run(
            tool: "sh",
            [
                "-c",
                "openssl x509 -in '\(file.path)' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
            ])
        let pin = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, pin.count == 44 else { throw SyncServerProcess.Failure("no pin: \(result)") }
        return pin
    }

    private static func openssl(_ arguments: [String]) throws {
        let result = try ChildProcess.run(tool: "openssl", arguments)
        guard result.status == 0 else { throw SyncServerProcess.Failure("openssl failed: \(result)") }
    }
}

/// `sync-device` with its own home folder, trusting the throwaway CA for pinned connections
/// (`OUTPOST_CA_FILE`) when given one.
struct PinnedDevice {
    let home: URL
    let binary: URL
    let caFile: URL?

    init(_ name: String, in folder: URL, ca: ThrowawayCA?) throws {
        home = folder.appendingPathComponent("device-\(name)", isDirectory: true)
        binary = try BuiltProducts.executable("sync-device")
        caFile = ca?.caFile
    }

    /// Starts a long-running command (`watch`) without waiting for it.
    func start(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(
            binary, arguments + ["--home", home.path], environment: caFile.map { ["OUTPOST_CA_FILE": $0.path] } ?? [:],
            removing: ["OUTPOST_DEVICE_NOW", "OUTPOST_HOME", "OUTPOST_FAULT_DELAY_MS", "OUTPOST_CA_FILE"])
    }

    func run(_ arguments: [String]) throws -> CommandResult {
        try start(arguments).wait(timeout: 60)
    }

    @discardableResult
    func ok(_ arguments: [String]) throws -> CommandResult {
        let result = try run(arguments)
        guard result.status == 0 else { throw SyncServerProcess.Failure("sync-device \(arguments.first ?? ""): \(result)") }
        return result
    }
}
