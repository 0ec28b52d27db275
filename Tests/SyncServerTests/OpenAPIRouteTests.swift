import Foundation
import OutpostTestSupport
import SampleServerApps
import Testing

@testable import SyncServer

/// `docs/openapi.yaml` and the router describe the same routes: a route added, renamed or
/// removed on one side only fails here.
@Suite("OpenAPI document", .blockingWork)
struct OpenAPIRouteTests {
    static let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/openapi.yaml")

    static let methods: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

    /// The top-level section `name` of the YAML text: its lines, without the key line.
    static func section(_ name: String, of text: String) -> [Substring] {
        var lines: [Substring] = []
        var inside = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if let first = line.first, first != " ", first != "#" {
                inside = line == "\(name):"
                continue
            }
            if inside { lines.append(line) }
        }
        return lines
    }

    /// The key of a line indented by exactly `indent` spaces (`  /health:` → `/health`).
    static func key(_ line: Substring, indent: Int) -> String? {
        let prefix = String(repeating: " ", count: indent)
        guard line.hasPrefix(prefix), line.dropFirst(indent).first.map({ $0 != " " && $0 != "#" && $0 != "-" }) == true,
            let colon = line.firstIndex(of: ":")
        else { return nil }
        return String(line[line.index(line.startIndex, offsetBy: indent)..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
    }

    /// Every operation of `paths:`: a path key at 2 spaces, its methods at 4.
    static func documentedRoutes(_ text: String) -> [RouteDescription] {
        var routes: [RouteDescription] = []
        var path: String?
        for line in section("paths", of: text) {
            if let key = key(line, indent: 2) {
                path = key
            } else if let key = key(line, indent: 4), methods.contains(key), let path {
                routes.append(RouteDescription(method: key.uppercased(), path: path))
            }
        }
        return routes
    }

    @Test("the paths and methods of docs/openapi.yaml are exactly the routes the router registers")
    func routesMatch() throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        #expect(text.hasPrefix("openapi: 3.1"))
        let documented = Self.documentedRoutes(text)
        let harness = try RouteHarness()
        let registered = buildRouter(
            configuration: harness.configuration,
            environment: ServerEnvironment(storage: harness.storage, signer: harness.signer, apps: SampleServerApps.all)
        ).routes

        #expect(Set(documented).count == documented.count, "an operation is documented twice")
        #expect(Set(registered).count == registered.count, "a route is registered twice")
        let undocumented = Set(registered).subtracting(documented).sorted()
        let unregistered = Set(documented).subtracting(registered).sorted()
        #expect(undocumented.isEmpty, "registered but not in docs/openapi.yaml: \(undocumented)")
        #expect(unregistered.isEmpty, "in docs/openapi.yaml but not registered: \(unregistered)")
        #expect(!registered.isEmpty)
    }

    @Test("every $ref of docs/openapi.yaml names a component it defines")
    func referencesResolve() throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        var defined: Set<String> = []
        var kind: String?
        for line in Self.section("components", of: text) {
            if let key = Self.key(line, indent: 2) {
                kind = key
            } else if let key = Self.key(line, indent: 4), let kind {
                defined.insert("#/components/\(kind)/\(key)")
            }
        }
        let pattern = try NSRegularExpression(pattern: #"#/components/[A-Za-z]+/[A-Za-z0-9_.-]+"#)
        let references = Set(
            pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { Range($0.range, in: text).map { String(text[$0]) } }
        )
        #expect(!references.isEmpty)
        let dangling = references.subtracting(defined).sorted()
        #expect(dangling.isEmpty, "dangling references: \(dangling)")
    }

    @Test("the line-wise reader finds nested paths and methods, and ignores other sections")
    func reader() {
        let yaml = """
            openapi: 3.1.0
            info:
              title: x
            paths:
              /a:
                parameters: []
                get:
                  responses: {}
                head:
                  summary: "get: not a key here"
              "/b/{id}":
                delete: {}
            components:
              schemas:
                get: {}
            """
        #expect(
            Self.documentedRoutes(yaml) == [
                RouteDescription(method: "GET", path: "/a"), RouteDescription(method: "HEAD", path: "/a"),
                RouteDescription(method: "DELETE", path: "/b/{id}"),
            ])
    }
}
