import Foundation
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import Testing

/// `contractc check --fleet` and `--fleet-url`, run as the real binary on a temporary contracts
/// folder whose `Item` was locked at version 1 and then raised, with a census file or a census
/// route on loopback.
@Suite("contractc check --fleet", .serialized, .blockingWork)
struct FleetCommandTests {
    /// A folder holding `contracts/` with `Item` locked at version 1 (`oldest_supported: 1`),
    /// then at version 2 with `oldest_supported: raisedTo` (nil: left at version 1), and
    /// `census.json` when a census is given.
    static func prepare(raisedTo: Int? = 2, census: String? = nil) throws -> ContractFolder {
        let folder = try ContractFolder(files: ["entities/item.yaml": ContractText(version: 1, fields: ["title: string?"]).yaml])
        let lock = try CommandLineTests.run(["lock"], in: folder.root)
        try #require(lock.status == 0, "\(lock)")
        if let raisedTo {
            try Data(ContractText(version: 2, fields: ["title: string?"], oldest: raisedTo).yaml.utf8)
                .write(to: folder.contracts.appendingPathComponent("entities/item.yaml"))
        }
        if let census { try Data(census.utf8).write(to: folder.root.appendingPathComponent("census.json")) }
        return folder
    }

    /// A census of 412 active devices, `old` of them on version 1 of `Item` and the rest on version 2.
    static func census(old: Int) -> String {
        """
        {"format": "outpost.fleet-census", "format_version": 1, "generated_at": "2026-11-27T08:00:00Z", "tenant": "acme",
         "active_window_seconds": 2592000, "devices": {"active": 412, "stale": 30},
         "contracts": {"Item": {"1": {"active": \(old), "stale": 10}, "2": {"active": \(412 - old), "stale": 20}}},
         "app_versions": {"1.4.0": {"active": 3, "stale": 10}}}
        """
    }

    static let summary = "1 contracts are compatible with contracts/contracts.lock (1 with released versions).\n"

    // MARK: A census file

    @Test("a raise within --max-cutoff passes with one fleet: line per raised contract")
    func withinMaximum() throws {
        let folder = try Self.prepare(census: Self.census(old: 3))
        defer { folder.remove() }
        let run = try CommandLineTests.run(["check", "--fleet", "census.json"], in: folder.root)
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.isEmpty)
        #expect(
            run.stdout == "fleet: Item: oldest_supported 1 → 2 refuses 3 of 412 active devices (0.73 %), within --max-cutoff 1 %\n" + Self.summary)
    }

    @Test("a raise above --max-cutoff fails with FLEET_CUTOFF_EXCEEDED at the oldest_supported line; a higher maximum lets it pass")
    func aboveMaximum() throws {
        let folder = try Self.prepare(census: Self.census(old: 9))
        defer { folder.remove() }
        let run = try CommandLineTests.run(["check", "--fleet", "census.json"], in: folder.root)
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.isEmpty)
        #expect(
            run.stderr == """
                contracts/entities/item.yaml:4:19: error[FLEET_CUTOFF_EXCEEDED]: Item: oldest_supported 1 → 2 refuses 9 of 412 active devices (2.18 %), above --max-cutoff 1 %
                  note: 9 active devices run version 1
                  note: counted in the fleet census of tenant acme, generated at 2026-11-27T08:00:00Z
                  help: keep `oldest_supported: 1` until fewer devices run an older version, or pass a higher --max-cutoff for a deliberate cutoff (see `contractc explain FLEET_CUTOFF_EXCEEDED`)
                1 error, 0 warnings

                """)
        let item = try String(contentsOf: folder.contracts.appendingPathComponent("entities/item.yaml"), encoding: .utf8)
        #expect(item.components(separatedBy: "\n")[3] == "oldest_supported: 2")

        for (maximum, status) in [("2.5", 0), ("2.5%", 0), ("2", 1), ("0.5", 1)] {
            let again = try CommandLineTests.run(["check", "--fleet", "census.json", "--max-cutoff", maximum], in: folder.root)
            #expect(again.status == Int32(status), "--max-cutoff \(maximum): \(again)")
        }
        let passing = try CommandLineTests.run(["check", "--fleet", "census.json", "--max-cutoff", "2.5%"], in: folder.root)
        #expect(passing.stdout.hasPrefix("fleet: Item: oldest_supported 1 → 2 refuses 9 of 412 active devices (2.18 %), within --max-cutoff 2.5 %\n"))
    }

    @Test("--format json carries the gate as a fleet member beside the diagnostics")
    func jsonFormat() throws {
        let folder = try Self.prepare(census: Self.census(old: 9))
        defer { folder.remove() }
        let run = try CommandLineTests.run(["check", "--fleet", "census.json", "--format", "json"], in: folder.root)
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.isEmpty, "machine formats keep stdout clean")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(run.stderr.utf8)) as? [String: Any], "\(run.stderr)")
        #expect(document["errors"] as? Int == 1)
        let diagnostic = try #require((document["diagnostics"] as? [[String: Any]])?.first)
        #expect(diagnostic["rule"] as? String == "FLEET_CUTOFF_EXCEEDED")
        #expect(diagnostic["file"] as? String == "contracts/entities/item.yaml")
        #expect(diagnostic["line"] as? Int == 4 && diagnostic["column"] as? Int == 19)
        let fleet = try #require(document["fleet"] as? [String: Any])
        #expect(fleet["tenant"] as? String == "acme" && fleet["active_devices"] as? Int == 412)
        let raise = try #require((fleet["raises"] as? [[String: Any]])?.first)
        #expect(raise["contract"] as? String == "Item" && raise["refused_devices"] as? Int == 9)
        #expect(raise["exceeds_max_cutoff"] as? Bool == true)

        let within = try CommandLineTests.run(["check", "--fleet", "census.json", "--format", "json", "--max-cutoff", "5"], in: folder.root)
        #expect(within.status == 0, "\(within)")
        #expect(within.stdout.isEmpty)
        let passed = try #require(try JSONSerialization.jsonObject(with: Data(within.stderr.utf8)) as? [String: Any])
        #expect(passed["errors"] as? Int == 0)
        let passedRaise = try #require(((passed["fleet"] as? [String: Any])?["raises"] as? [[String: Any]])?.first)
        #expect(passedRaise["exceeds_max_cutoff"] as? Bool == false)
    }

    @Test("--format github annotates the oldest_supported line")
    func githubFormat() throws {
        let folder = try Self.prepare(census: Self.census(old: 9))
        defer { folder.remove() }
        let run = try CommandLineTests.run(["check", "--fleet", "census.json", "--format", "github"], in: folder.root)
        #expect(run.status == 1)
        #expect(run.stderr.hasPrefix("::error file=contracts/entities/item.yaml,line=4,col=19,title=FLEET_CUTOFF_EXCEEDED::"), "\(run.stderr)")
    }

    @Test("a contract whose oldest_supported does not rise prints nothing about the fleet")
    func noRaise() throws {
        let folder = try Self.prepare(raisedTo: nil, census: Self.census(old: 400))
        defer { folder.remove() }
        let run = try CommandLineTests.run(["check", "--fleet", "census.json"], in: folder.root)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == Self.summary)
        #expect(run.stderr.isEmpty)
    }

    static let brokenCensuses: [(name: String, contents: String?, error: String)] = [
        ("missing", nil, "the fleet census 'census.json' does not exist"),
        ("not JSON", "format: outpost.fleet-census\n", "the fleet census 'census.json' cannot be used: not valid JSON"),
        (
            "another format", #"{"format": "outpost.user-export", "format_version": 1}"#,
            "the fleet census 'census.json' cannot be used: `format` is \"outpost.user-export\", not \"outpost.fleet-census\""
        ),
        (
            "a later format_version", #"{"format": "outpost.fleet-census", "format_version": 2, "devices": {"active": 1}, "contracts": {}}"#,
            "the fleet census 'census.json' cannot be used: unsupported `format_version` 2: this contractc reads version 1"
        ),
        (
            "no contracts", #"{"format": "outpost.fleet-census", "format_version": 1, "devices": {"active": 1}}"#,
            "the fleet census 'census.json' cannot be used: missing `contracts`"
        ),
    ]

    @Test("a census that cannot be read or used: exit 2 with what is wrong, nothing checked", arguments: brokenCensuses.indices)
    func brokenCensus(_ index: Int) throws {
        let (_, contents, error) = Self.brokenCensuses[index]
        let folder = try Self.prepare(census: contents)
        defer { folder.remove() }
        let run = try CommandLineTests.run(["check", "--fleet", "census.json"], in: folder.root)
        #expect(run.status == 2, "\(run)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr == "error: \(error)\n")
    }

    @Test("a folder where the census should be is refused")
    func censusFolder() throws {
        let folder = try Self.prepare()
        defer { folder.remove() }
        try FileManager.default.createDirectory(at: folder.root.appendingPathComponent("census.json"), withIntermediateDirectories: true)
        let run = try CommandLineTests.run(["check", "--fleet", "census.json"], in: folder.root)
        #expect(run.status == 2)
        #expect(run.stderr == "error: the fleet census 'census.json' is a folder\n")
    }

    static let misuse: [(arguments: [String], error: String)] = [
        (
            ["--fleet", "census.json", "--fleet-url", "http://127.0.0.1:9/fleet", "--token-file", "admin.token"],
            "--fleet and --fleet-url both name a census; pass one of them"
        ),
        (["--fleet-url", "http://127.0.0.1:9/fleet"], "--fleet-url needs --token-file, the file holding the admin token"),
        (["--fleet-url", "file:///etc/passwd", "--token-file", "admin.token"], "--fleet-url takes an http or https URL; got 'file:///etc/passwd'"),
        (["--token-file", "admin.token"], "--token-file goes with --fleet-url"),
        (["--fleet", "census.json", "--max-cutoff", "lots"], "--max-cutoff takes a percentage from 0 to 100, such as 1, 0.5 or 1%; got 'lots'"),
        (["--fleet", "census.json", "--max-cutoff", "150"], "--max-cutoff takes a percentage from 0 to 100, such as 1, 0.5 or 1%; got '150'"),
        (["--max-cutoff", "1"], "--max-cutoff goes with --fleet or --fleet-url"),
    ]

    @Test("flags that do not go together, or a bad --max-cutoff, are usage errors (64)", arguments: misuse.indices)
    func flagMisuse(_ index: Int) throws {
        let (arguments, error) = Self.misuse[index]
        let folder = try Self.prepare(census: Self.census(old: 3))
        defer { folder.remove() }
        let run = try CommandLineTests.run(["check"] + arguments, in: folder.root)
        #expect(run.status == 64, "\(run)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains(error), "\(run.stderr)")
    }

    // MARK: A census route

    static let adminToken = "fleet-admin-token"

    /// A server on loopback, in the test's process, answering `GET /admin/v1/fleet?active=30d`
    /// with `census` to the admin token and 401 with the server's error body to anything else;
    /// `/broken` answers 500 without a body.
    static func serving<Value: Sendable>(census: String, _ body: @Sendable (String) async throws -> Value) async throws -> Value {
        let router = Router()
        router.get("/admin/v1/fleet") { request, _ -> Response in
            guard request.headers[.authorization] == "Bearer \(adminToken)" else {
                return Response(
                    status: .unauthorized, headers: [.contentType: "application/json"],
                    body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"error": {"code": "unauthorized", "message": "invalid admin token"}}"#)))
            }
            guard request.uri.queryParameters["active"] == "30d" else { return Response(status: .badRequest) }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: census)))
        }
        router.get("/broken") { _, _ in Response(status: .internalServerError) }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        return try await app.test(.live) { client in try await body("http://127.0.0.1:\(try #require(client.port))") }
    }

    /// `contractc ARGUMENTS` on a thread of its own: waiting for the child must not hold one of
    /// the few threads the server's tasks run on.
    static func runOffPool(_ arguments: [String], in directory: URL) async throws -> CommandResult {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try CommandLineTests.run(arguments, in: directory) }) }
        }
    }

    @Test("--fleet-url sends the token file's token (its line end trimmed) and gates on the census it answers")
    func fleetURL() async throws {
        let folder = try Self.prepare()
        defer { folder.remove() }
        try Data("\(Self.adminToken)\n".utf8).write(to: folder.root.appendingPathComponent("admin.token"))
        try await Self.serving(census: Self.census(old: 3)) { base in
            let url = "\(base)/admin/v1/fleet?active=30d"
            let within = try await Self.runOffPool(["check", "--fleet-url", url, "--token-file", "admin.token"], in: folder.root)
            #expect(within.status == 0, "\(within)")
            #expect(
                within.stdout.hasPrefix("fleet: Item: oldest_supported 1 → 2 refuses 3 of 412 active devices (0.73 %), within --max-cutoff 1 %\n"))
            let above = try await Self.runOffPool(
                ["check", "--fleet-url", url, "--token-file", "admin.token", "--max-cutoff", "0.5"], in: folder.root)
            #expect(above.status == 1, "\(above)")
            #expect(above.stderr.contains("contracts/entities/item.yaml:4:19: error[FLEET_CUTOFF_EXCEEDED]"), "\(above.stderr)")
        }
    }

    @Test("--fleet-url answering an error: exit 2 with the status and the server's message")
    func fleetURLRefused() async throws {
        let folder = try Self.prepare()
        defer { folder.remove() }
        try Data("not-the-token\r\n".utf8).write(to: folder.root.appendingPathComponent("wrong.token"))
        try Data("\(Self.adminToken)\n".utf8).write(to: folder.root.appendingPathComponent("admin.token"))
        try await Self.serving(census: Self.census(old: 3)) { base in
            let url = "\(base)/admin/v1/fleet?active=30d"
            let refused = try await Self.runOffPool(["check", "--fleet-url", url, "--token-file", "wrong.token"], in: folder.root)
            #expect(refused.status == 2, "\(refused)")
            #expect(refused.stdout.isEmpty)
            #expect(refused.stderr.hasPrefix("error: GET \(url) answered 401 "), "\(refused.stderr)")
            #expect(refused.stderr.hasSuffix(": invalid admin token\n"), "\(refused.stderr)")
            #expect(!refused.stderr.contains("not-the-token"), "the token is never printed")

            let broken = try await Self.runOffPool(["check", "--fleet-url", "\(base)/broken", "--token-file", "admin.token"], in: folder.root)
            #expect(broken.status == 2, "\(broken)")
            #expect(broken.stderr.hasPrefix("error: GET \(base)/broken answered 500 "), "\(broken.stderr)")
            #expect(!broken.stderr.contains(": \n"))
        }
    }

    @Test("--fleet-url answering something other than a census: exit 2, named by its URL")
    func fleetURLMalformed() async throws {
        let folder = try Self.prepare()
        defer { folder.remove() }
        try Data(Self.adminToken.utf8).write(to: folder.root.appendingPathComponent("admin.token"))
        try await Self.serving(census: "<html>maintenance</html>") { base in
            let url = "\(base)/admin/v1/fleet?active=30d"
            let run = try await Self.runOffPool(["check", "--fleet-url", url, "--token-file", "admin.token"], in: folder.root)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr == "error: the fleet census from \(url) cannot be used: not valid JSON\n")
        }
    }

    @Test("--fleet-url with no server listening, or without a usable token file: exit 2")
    func fleetURLUnreachable() throws {
        let folder = try Self.prepare()
        defer { folder.remove() }
        try Data(Self.adminToken.utf8).write(to: folder.root.appendingPathComponent("admin.token"))
        try Data("\n".utf8).write(to: folder.root.appendingPathComponent("empty.token"))
        // Port 9 (discard) on loopback: nothing listens there in a test environment.
        let url = "http://127.0.0.1:9/admin/v1/fleet"
        let unreachable = try CommandLineTests.run(["check", "--fleet-url", url, "--token-file", "admin.token"], in: folder.root)
        #expect(unreachable.status == 2, "\(unreachable)")
        #expect(unreachable.stderr == "error: GET \(url) failed: cannot connect to 127.0.0.1\n")
        let missing = try CommandLineTests.run(["check", "--fleet-url", url, "--token-file", "no.token"], in: folder.root)
        #expect(missing.status == 2)
        #expect(missing.stderr == "error: the token file 'no.token' does not exist\n")
        let empty = try CommandLineTests.run(["check", "--fleet-url", url, "--token-file", "empty.token"], in: folder.root)
        #expect(empty.status == 2)
        #expect(empty.stderr == "error: the token file 'empty.token' is empty\n")
    }
}
