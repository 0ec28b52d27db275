import ContractRuntime
import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Every operation of `docs/openapi.yaml` walked with the hostile classes of input, on a real
/// server on loopback: identifiers with U+0000, a control character, a non-NFC spelling or too
/// many bytes in each path and query parameter and identifier header; bodies over the route's
/// limit and JSON holding U+0000; a peer that stalls its body. Each must get its documented
/// refusal, and the audit log must verify at the end.
///
/// The operations come from the document, not from a list here: a route added later is walked
/// as soon as it is documented (and ``OpenAPIRouteTests`` fails a route that is not), so a
/// route without the shared checks fails here.
@Suite("Route walk: every documented route against the hostile classes", .blockingWork)
struct RouteWalkTests {
    /// One documented operation and what it takes.
    struct Operation: CustomStringConvertible {
        var method: String
        var path: String
        /// `name` → `query` / `header` / `path`.
        var parameters: [(name: String, location: String, required: Bool)] = []
        var hasBody = false
        var jsonBody = false

        var description: String { "\(method) \(path)" }
        var pathParameters: [String] { parameters.filter { $0.location == "path" }.map(\.name) }
        var queryParameters: [String] { parameters.filter { $0.location == "query" }.map(\.name) }
        var headerParameters: [String] { parameters.filter { $0.location == "header" }.map(\.name) }
    }

    /// A hostile spelling of an identifier, percent-encoded for a URL, and the refusals it may get.
    struct HostileValue: CustomStringConvertible {
        var name: String
        var encoded: String
        /// The value itself, for a header.
        var raw: String
        var codes: Set<ErrorCode>

        var description: String { name }
    }

    static let identifierCodes: Set<ErrorCode> = [.nulCharacter, .identifierInvalid, .identifierNotNormalized, .malformedRequest]

    static func hostileValues(maximumBytes: Int) -> [HostileValue] {
        [
            HostileValue(name: "U+0000", encoded: "u-nul%00x", raw: "u-nul\u{0}x", codes: [.nulCharacter]),
            HostileValue(name: "control character", encoded: "u-ctl%01x", raw: "u-ctl\u{1}x", codes: [.identifierInvalid]),
            HostileValue(name: "not NFC", encoded: "jose%CC%81", raw: "jose\u{301}", codes: [.identifierNotNormalized]),
            HostileValue(
                name: "oversize", encoded: String(repeating: "a", count: maximumBytes + 1), raw: String(repeating: "a", count: maximumBytes + 1),
                codes: [.identifierInvalid]),
        ]
    }

    // MARK: The document

    static func operations() throws -> [Operation] {
        let text = try String(contentsOf: OpenAPIRouteTests.document, encoding: .utf8)
        let components = componentParameters(text)
        var operations: [Operation] = []
        var path: String?
        var current: Operation?
        var pendingName: String?
        var pendingRequired = false
        var lastNamed: String?
        var inRequestBody = false
        func finish() {
            if let operation = current { operations.append(operation) }
            current = nil
        }
        for line in OpenAPIRouteTests.section("paths", of: text) {
            if let key = OpenAPIRouteTests.key(line, indent: 2) {
                finish()
                path = key
                continue
            }
            if let key = OpenAPIRouteTests.key(line, indent: 4), OpenAPIRouteTests.methods.contains(key), let path {
                finish()
                current = Operation(method: key.uppercased(), path: path)
                for name in Self.templateNames(path) { current?.parameters.append((name, "path", true)) }
                inRequestBody = false
                continue
            }
            guard current != nil else { continue }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            let indent = line.prefix { $0 == " " }.count
            if indent == 6 { inRequestBody = trimmed.hasPrefix("requestBody:") }
            if inRequestBody {
                if trimmed.hasPrefix("requestBody:") { current?.hasBody = true }
                if trimmed.hasPrefix("application/json") { current?.jsonBody = true }
            }
            if let ref = trimmed.range(of: "$ref: \"#/components/parameters/") {
                let name = String(trimmed[ref.upperBound...].prefix { $0 != "\"" })
                if let parameter = components[name], parameter.location != "path" { current?.parameters.append(parameter) }
            } else if trimmed.hasPrefix("- name: ") {
                pendingName = String(trimmed.dropFirst("- name: ".count))
                pendingRequired = false
                lastNamed = nil
            } else if trimmed.hasPrefix("required: true") {
                // Before or after `in:`: either way it belongs to the parameter named last.
                pendingRequired = true
                if let last = current?.parameters.indices.last, current?.parameters[last].name == lastNamed {
                    current?.parameters[last].required = true
                }
            } else if trimmed.hasPrefix("in: "), let name = pendingName {
                let location = String(trimmed.dropFirst("in: ".count))
                if location != "path" { current?.parameters.append((name, location, pendingRequired)) }
                lastNamed = name
                pendingName = nil
            }
        }
        finish()
        return operations
    }

    /// `components/parameters`: each named parameter's name and location.
    static func componentParameters(_ text: String) -> [String: (name: String, location: String, required: Bool)] {
        var parameters: [String: (name: String, location: String, required: Bool)] = [:]
        var inParameters = false
        var key: String?
        var name: String?
        for line in OpenAPIRouteTests.section("components", of: text) {
            if let section = OpenAPIRouteTests.key(line, indent: 2) {
                inParameters = section == "parameters"
                continue
            }
            guard inParameters else { continue }
            if let parameter = OpenAPIRouteTests.key(line, indent: 4) {
                key = parameter
                name = nil
                continue
            }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("name: ") { name = String(trimmed.dropFirst("name: ".count)) }
            if trimmed.hasPrefix("in: "), let key, let name {
                parameters[key] = (name, String(trimmed.dropFirst("in: ".count)), false)
            }
        }
        return parameters
    }

    static func templateNames(_ path: String) -> [String] {
        path.split(separator: "/").filter { $0.hasPrefix("{") && $0.hasSuffix("}") }.map { String($0.dropFirst().dropLast()) }
    }

    /// A valid value of each path parameter and required query parameter.
    static let validValues: [String: String] = [
        "entity": "Unit", "id": "unit-1", "sink": "s-1", "user": "u-1", "device": "d-1", "team": "team-1", "scope": "user",
    ]

    /// The operation's URI with `hostile` (already encoded) in the place of `target`, valid
    /// values elsewhere.
    static func uri(_ operation: Operation, target: String? = nil, hostile: String? = nil) -> String {
        var path = operation.path
        for name in operation.pathParameters {
            let value = name == target ? hostile! : validValues[name] ?? "x"
            path = path.replacingOccurrences(of: "{\(name)}", with: value)
        }
        var query: [String] = []
        for (name, location, required) in operation.parameters where location == "query" {
            if name == target {
                query.append("\(name)=\(hostile!)")
            } else if required {
                query.append("\(name)=\(validValues[name] ?? "x")")
            }
        }
        return query.isEmpty ? path : path + "?" + query.joined(separator: "&")
    }

    /// The token an operation is called with: an admin's for `/admin`, a device's otherwise.
    static func token(_ operation: Operation, _ h: HostileHarness) -> String {
        operation.path.hasPrefix("/admin") ? h.adminToken : h.ownerToken
    }

    /// The operations the walk sends requests to: all but `/health` and `/metrics` (no input).
    static func walked() throws -> [Operation] {
        try operations().filter { $0.path != "/health" && $0.path != "/metrics" }
    }

    // MARK: Tests

    @Test("the walk reads every documented operation, its parameters and its body")
    func documentIsRead() throws {
        let operations = try Self.operations()
        let registered = Set(try OpenAPIRouteTests.documentedRoutes(String(contentsOf: OpenAPIRouteTests.document, encoding: .utf8)))
        #expect(Set(operations.map { RouteDescription(method: $0.method, path: $0.path) }) == registered)
        let pull = try #require(operations.first { $0.path == "/sync/v1/pull" })
        #expect(pull.queryParameters.contains("scope") && pull.queryParameters.contains("cursor"))
        #expect(pull.parameters.first { $0.name == "scope" }?.required == true)
        #expect(pull.parameters.first { $0.name == "cursor" }?.required == false)
        #expect(pull.headerParameters.contains(ProtocolHeaders.clientID))
        #expect(operations.first { $0.path == "/sync/v1/push" }?.jsonBody == true)
        #expect(operations.first { $0.path == "/admin/v1/assets/{id}" }.map { $0.hasBody && !$0.jsonBody } == true)
        #expect(operations.first { $0.path == "/admin/v1/fleet/devices/{user}/{device}" }?.pathParameters == ["user", "device"])
    }

    @Test("a hostile identifier in any path or query parameter is refused 400 with its code, and reaches nothing", arguments: StorageKind.allCases)
    func hostileParameters(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        let operations = try Self.walked()
        try await h.live { client in
            // Data the hostile spellings would reach if cut at U+0000: u-nul's rows and tokens.
            let nul = h.token(user: "u-nul", device: "d-nul")
            #expect(try await client.push(SampleMutations.push([SampleMutations.answer(seq: 1)], client: "nul-client"), token: nul).status == .ok)
            var walked = 0
            for operation in operations {
                for target in operation.pathParameters + operation.queryParameters {
                    let maximum = operation.pathParameters.contains(target) ? Identifier.maximumBytes : RequestInputMiddleware.maximumQueryValueBytes
                    for hostile in Self.hostileValues(maximumBytes: maximum) {
                        let uri = Self.uri(operation, target: target, hostile: hostile.encoded)
                        let response = try await client.execute(
                            uri: uri, method: HTTPRequest.Method(operation.method)!, headers: HostileHarness.headers(Self.token(operation, h)),
                            body: operation.hasBody ? ByteBuffer(string: "{}") : nil)
                        #expect(
                            response.status == .badRequest, "\(operation) `\(target)` \(hostile): \(response.status) \(response.bodyText.prefix(300))"
                        )
                        if operation.method == "HEAD" {
                            // A HEAD answer has no body to carry the error.
                        } else if let code = try? response.errorDetail.code {
                            #expect(hostile.codes.union([.malformedRequest]).contains(code), "\(operation) `\(target)` \(hostile): \(code)")
                        } else {
                            Issue.record("\(operation) `\(target)` \(hostile): not a JSON error: \(response.bodyText.prefix(300))")
                        }
                        walked += 1
                    }
                }
                for header in operation.headerParameters where header == ProtocolHeaders.clientID {
                    for hostile in Self.hostileValues(maximumBytes: RequestInputMiddleware.maximumClientIDBytes) where hostile.name != "U+0000" {
                        // U+0000 and other control bytes cannot be written into an HTTP header
                        // by this client; the not-NFC and oversize spellings can.
                        guard hostile.name != "control character" else { continue }
                        var headers = HostileHarness.headers(Self.token(operation, h))
                        headers[HTTPField.Name(header)!] = hostile.raw
                        let response = try await client.execute(
                            uri: Self.uri(operation), method: HTTPRequest.Method(operation.method)!, headers: headers,
                            body: operation.hasBody ? ByteBuffer(string: "{}") : nil)
                        #expect(response.status == .badRequest, "\(operation) header \(header) \(hostile): \(response.status)")
                        walked += 1
                    }
                }
            }
            #expect(walked > 100, "the walk sent \(walked) hostile requests")
            // Nothing reached u-nul: her row and her token are as they were.
            let pulled = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(nul))
            #expect(pulled.status == .ok, "u-nul is neither erased nor revoked: \(pulled.bodyText.prefix(200))")
            #expect(pulled.bodyText.contains("9b2f3c1e-0000-4000-8000-000000000001"))
        }
        #expect(try await AuditChain.verify(h.storage).isIntact)
    }

    @Test("a body over the route's limit is refused 413 before it is read, on every route that takes one", arguments: StorageKind.allCases)
    func oversizeBodies(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind) { configuration in
            configuration.maximumBodyBytes = 64 * 1024
            configuration.maximumAssetBytes = 128 * 1024
        }
        let operations = try Self.walked().filter(\.hasBody)
        #expect(operations.count >= 7, "\(operations)")
        try await h.live { client in
            for operation in operations {
                // Routes that take a file's bytes have the larger limit, the same for all of them.
                let takesFileBytes = operation.path.hasPrefix("/admin/v1/assets") || operation.path.hasPrefix("/sync/v1/files/uploads")
                let size = takesFileBytes ? 128 * 1024 + 1 : 64 * 1024 + 1
                let response = try await client.execute(
                    uri: Self.uri(operation), method: HTTPRequest.Method(operation.method)!,
                    headers: HostileHarness.headers(Self.token(operation, h)),
                    body: ByteBuffer(repeating: UInt8(ascii: " "), count: size))
                #expect(response.status == .contentTooLarge, "\(operation): \(response.status) \(response.bodyText.prefix(200))")
                #expect((try? response.errorDetail.code) == .payloadTooLarge, "\(operation)")
            }
        }
        #expect(try await AuditChain.verify(h.storage).isIntact)
    }

    @Test("a JSON body holding U+0000 in a string is refused 400 nul_character on every route that takes JSON", arguments: StorageKind.allCases)
    func nulInJSONBodies(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        let operations = try Self.walked().filter(\.jsonBody)
        #expect(operations.count >= 6, "\(operations)")
        try await h.live { client in
            let auditBefore = try await h.auditCount()
            for operation in operations {
                let body = #"{"id": "u-nul\u0000x", "user": "u-nul\u0000x", "device": "d\u0000", "client_id": "c\u0000", "url": "https://x\u0000"}"#
                let response = try await client.execute(
                    uri: Self.uri(operation), method: HTTPRequest.Method(operation.method)!,
                    headers: HostileHarness.headers(Self.token(operation, h)),
                    body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "\(operation): \(response.status) \(response.bodyText.prefix(200))")
                #expect((try? response.errorDetail.code) == .nulCharacter, "\(operation): \(response.bodyText.prefix(200))")
            }
            #expect(try await h.auditCount() == auditBefore, "nothing refused was recorded")
        }
        #expect(try await AuditChain.verify(h.storage).isIntact)
    }

    /// The rows of every table but the audit log's, as a sum: what requests have made the
    /// server keep.
    static func storedRows(_ h: HostileHarness) async throws -> Int {
        let queue = try GRDB.DatabaseQueue(path: h.folder.appendingPathComponent("server.sqlite").path)
        return try await queue.read { db in
            var total = 0
            for table in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            where !table.hasPrefix("audit") {
                total += try Int.fetchOne(db, sql: "SELECT count(*) FROM \"\(table)\"") ?? 0
            }
            return total
        }
    }

    @Test("many distinct values from one identity grow nothing past its caps: census names, sinks, stored rows")
    func manyDistinctValuesFromOneIdentity() async throws {
        let limits = IdentityStateLimits()
        let h = try await HostileHarness.make(.sqlite)
        let operations = try Self.walked().filter {
            $0.method == "GET" && !$0.path.hasPrefix("/admin") && $0.path != "/sync/v1/live"
        }
        #expect(operations.count >= 3, "\(operations)")
        try await h.live { client in
            // Alice's device exists in the census before the flood.
            #expect(
                try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(h.ownerToken)).status == .ok)
            let before = try await Self.storedRows(h)
            for operation in operations {
                for index in 0..<60 {
                    let made = (0..<20).map { "Made\(index)x\($0)=1" }.joined(separator: ",")
                    let headers = HostileHarness.headers(
                        h.ownerToken,
                        [
                            HTTPField.Name(ProtocolHeaders.schema)!: "AssessmentResponse=1," + made,
                            HTTPField.Name(ProtocolHeaders.appVersion)!: "walk-app/\(index)",
                            HTTPField.Name(ProtocolHeaders.clientID)!: "walk-client-\(index)",
                        ])
                    _ = try await client.execute(uri: Self.uri(operation), method: .get, headers: headers)
                }
            }
            let after = try await Self.storedRows(h)
            #expect(after - before <= 2, "\(operations.count * 60) requests from one device made the server keep \(after - before) more rows")

            let device = try await client.execute(
                uri: "/admin/v1/fleet/devices/alice/alice-phone", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(device.status == .ok, "\(device.bodyText.prefix(200))")
            #expect(!device.bodyText.contains("Made"), "the census recorded a contract the server does not know")
            #expect(device.body.readableBytes < 16_384, "the device's census record is \(device.body.readableBytes) bytes")
            let fleet = try await client.execute(uri: "/admin/v1/fleet", method: .get, headers: HostileHarness.headers(h.adminToken))
            #expect(fleet.status == .ok && !fleet.bodyText.contains("Made") && fleet.body.readableBytes < 16_384)

            // An admin adding sinks with new ids: the tenant's cap, then 409 limit_reached.
            var refused = 0
            for index in 0..<(limits.sinksPerTenant + 5) {
                let body = #"{"id": "walk-\#(index)", "url": "https://receiver-\#(index).example.com/hook", "secret": "s3cret-s3cret-s3cret"}"#
                let added = try await client.execute(
                    uri: "/admin/v1/sinks", method: .post, headers: HostileHarness.headers(h.adminToken), body: ByteBuffer(string: body))
                if added.status == .conflict {
                    #expect((try? added.errorDetail.code) == .limitReached)
                    refused += 1
                } else {
                    #expect(added.status == .ok || added.status == .created, "\(added.status) \(added.bodyText.prefix(200))")
                }
            }
            #expect(refused == 5, "sinks past the tenant's cap of \(limits.sinksPerTenant)")
        }
        #expect(try await AuditChain.verify(h.storage).isIntact)
    }

    @Test("every listing route answers within its page budget over rows near the largest a contract allows", arguments: StorageKind.allCases)
    func listingsStayWithinThePageBudget(_ kind: StorageKind) async throws {
        let pageBytes = 200_000
        let rowBytes = 60_000
        let h = try await HostileHarness.make(kind) { $0.pageBytes = pageBytes }
        let operations = try Self.walked().filter { $0.method == "GET" && $0.path != "/sync/v1/live" }
        try await h.live { client in
            for start in stride(from: 1, through: 12, by: 4) {
                let mutations = (start...start + 3).map { ListingBudgetTests.largeStatement(seq: Int64($0), bytes: rowBytes) }
                let pushed = try await client.push(SampleMutations.push(mutations, client: "alice-phone"), token: h.ownerToken)
                #expect(pushed.status == .ok, "\(pushed.bodyText.prefix(200))")
            }
            var listed = 0
            for operation in operations {
                var uri = Self.uri(operation).replacingOccurrences(of: "/u-1", with: "/alice").replacingOccurrences(of: "/d-1", with: "/alice-phone")
                if operation.queryParameters.contains("limit") { uri += (uri.contains("?") ? "&" : "?") + "limit=1000" }
                let token = operation.path.hasPrefix("/admin") ? h.adminToken : h.ownerToken
                let response = try await client.execute(uri: uri, method: .get, headers: HostileHarness.headers(token))
                #expect([.ok, .notFound].contains(response.status), "\(uri): \(response.status) \(response.bodyText.prefix(200))")
                // The export streams the whole of a user's data in chunks of the page budget,
                // each holding its room in the memory budget: its body is not one page.
                guard response.status == .ok, !operation.path.hasSuffix("/export") else { continue }
                #expect(
                    response.body.readableBytes <= pageBytes + rowBytes + 16_384,
                    "\(uri): \(response.body.readableBytes) bytes in one answer (page budget \(pageBytes))")
                listed += 1
            }
            #expect(listed >= 5, "\(listed) listings answered")
        }
        #expect(try await AuditChain.verify(h.storage).isIntact)
    }

    /// A form of a console page: its method, action and fields with the values the page gave them.
    struct ConsoleForm: Hashable {
        var method: String
        var action: String
        var fields: [String: String]
    }

    /// The value of `attribute` in one HTML tag's text.
    static func attribute(_ name: String, in tag: Substring) -> String? {
        guard let range = tag.range(of: " \(name)=\"") else { return nil }
        return String(tag[range.upperBound...].prefix { $0 != "\"" }).replacingOccurrences(of: "&amp;", with: "&")
    }

    /// The forms of a console page and the console links it holds.
    static func scan(_ page: String) -> (forms: [ConsoleForm], links: [String]) {
        var forms: [ConsoleForm] = []
        for chunk in page.components(separatedBy: "<form").dropFirst() {
            let body = chunk.components(separatedBy: "</form>")[0]
            let head = body.prefix { $0 != ">" }
            guard let action = attribute("action", in: " " + head) else { continue }
            var form = ConsoleForm(method: (attribute("method", in: " " + head) ?? "get").uppercased(), action: action, fields: [:])
            for tag in body.components(separatedBy: "<").dropFirst() where tag.hasPrefix("input") || tag.hasPrefix("select") {
                let text = " " + tag.prefix { $0 != ">" }
                guard let name = attribute("name", in: Substring(text)) else { continue }
                if form.fields[name] == nil || text.contains(" checked") { form.fields[name] = attribute("value", in: Substring(text)) ?? "x" }
            }
            forms.append(form)
        }
        var links: [String] = []
        for chunk in page.components(separatedBy: "href=\"/console").dropFirst() {
            let path = "/console" + chunk.prefix { $0 != "\"" && $0 != "?" && $0 != "#" }
            if !path.hasPrefix("/console/assets") { links.append(path.replacingOccurrences(of: "&amp;", with: "&")) }
        }
        return (forms, links)
    }

    @Test("every form of every console page, each field holding U+0000 in turn, is refused and changes nothing", arguments: StorageKind.allCases)
    func consoleForms(_ kind: StorageKind) async throws {
        let h = try await HostileHarness.make(kind)
        try await h.live { client in
            let pushed = try await client.push(SampleMutations.push([SampleMutations.answer(seq: 1)], client: "alice-phone"), token: h.ownerToken)
            #expect(pushed.status == .ok)
            var browser = ConsoleTests.Browser(client)
            _ = try await browser.signIn(h.adminToken)
            let auditBefore = try await h.auditCount()

            // Every console page reachable from the overview, and their forms.
            var queue = ["/console"]
            var visited: Set<String> = []
            var forms: Set<ConsoleForm> = []
            while let path = queue.popLast(), visited.count < 60 {
                guard visited.insert(path).inserted, path != "/console/sign-out" else { continue }
                let page = try await browser.get(path)
                guard page.status == .ok else { continue }
                let (found, links) = Self.scan(page.bodyText)
                forms.formUnion(found.filter { $0.action != "/console/sign-out" && $0.action != "/console/sign-in" })
                queue.append(contentsOf: links.filter { !visited.contains($0) })
            }
            #expect(visited.count >= 6, "console pages walked: \(visited.sorted())")
            #expect(forms.contains { $0.action == "/console/revocations" }, "forms found: \(forms.map(\.action).sorted())")
            #expect(forms.contains { $0.method == "GET" }, "a GET form (the rollout gate, the erasure's confirmation)")

            var probes = 0
            for form in forms {
                for field in form.fields.keys.sorted() {
                    var fields = form.fields
                    fields[field] = "walk\u{0}x"
                    let response: TestResponse
                    if form.method == "POST" {
                        let csrf = fields.removeValue(forKey: "csrf")
                        response = try await browser.post(form.action, fields, csrf: field == "csrf" ? .some(csrf ?? nil) : .none)
                    } else {
                        let query = fields.map { "\(ConsoleTests.Browser.encode($0.key))=\(ConsoleTests.Browser.encode($0.value))" }.sorted()
                        response = try await browser.get(form.action + "?" + query.joined(separator: "&"))
                    }
                    #expect(
                        [.badRequest, .forbidden].contains(response.status),
                        "\(form.method) \(form.action) `\(field)` with U+0000: \(response.status) \(response.bodyText.prefix(200))")
                    probes += 1
                }
            }
            #expect(probes >= 6, "\(probes) form fields probed")
            #expect(try await h.auditCount() == auditBefore, "a refused form wrote something")
            let pulled = try await client.execute(uri: "/sync/v1/pull?scope=user", method: .get, headers: HostileHarness.headers(h.ownerToken))
            #expect(pulled.status == .ok, "alice is neither revoked nor erased")
            #expect(try await browser.get("/console").status == .ok, "the session is still open")
        }
        #expect(try await AuditChain.verify(h.storage).isIntact)
    }

    @Test("a peer that sends a route's headers and stalls its body is cut off at the body deadline, on every route that takes one")
    func stalledBodies() async throws {
        let h = try await HostileHarness.make(.sqlite) { configuration in
            configuration.timeouts = ServerConfiguration.Timeouts(headers: .seconds(2), body: .seconds(1), idle: .seconds(5))
        }
        let operations = try Self.walked().filter(\.hasBody)
        try await h.serve { server in
            let port = try #require(server.url.port)
            try await withThrowingTaskGroup(of: (String, Bool, Duration).self) { group in
                for operation in operations {
                    let request =
                        "\(operation.method) \(Self.uri(operation)) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.token(operation, h))\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"partial\": "
                    group.addTask {
                        try await RawHTTP.onOwnThread {
                            let started = ContinuousClock.now
                            let descriptor = try RawHTTP.connect(port: port)
                            defer { close(descriptor) }
                            RawHTTP.send(request, on: descriptor)
                            let (_, closed) = RawHTTP.receive(on: descriptor)
                            return (operation.description, closed, ContinuousClock.now - started)
                        }
                    }
                }
                for try await (operation, closed, elapsed) in group {
                    #expect(closed, "\(operation): the stalled connection was still open after \(elapsed)")
                    #expect(elapsed < .seconds(10), "\(operation): closed only after \(elapsed)")
                }
            }
        }
    }
}

extension AuditChain.Verification {
    var isIntact: Bool {
        if case .intact = self { return true }
        return false
    }
}
