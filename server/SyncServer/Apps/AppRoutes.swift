public import Foundation
public import HTTPTypes
public import Hummingbird
import NIOCore
import SyncProtocol

/// Where an app adds its HTTP routes (``ServerApp/addRoutes(to:)``): behind the same
/// middleware as the sync routes (security headers, limits, errors as JSON, authentication),
/// listed with them (``SyncRouter/routes``).
public struct AppRoutes {
    /// Who may call a route.
    public enum Access: Sendable {
        /// Any authenticated token (a device's, an admin's).
        case device
        /// Admin tokens only.
        case admin
    }

    /// The server's configuration.
    public let configuration: ServerConfiguration
    /// Storage, clock, signer and the other apps, as the server was made.
    public let environment: ServerEnvironment
    let table: RouteTable
    let authenticated: RouterGroup<SyncRequestContext>
    let admin: RouterGroup<SyncRequestContext>

    /// Answers `method` on `path` (a template: `/api/v1/things/{id}`) for callers of `access`.
    /// The handler's thrown ``ServiceError`` becomes its JSON error answer.
    public func add(
        _ method: HTTPRequest.Method, _ path: String, access: Access, use handler: @escaping @Sendable (AppRequest) async throws -> Response
    ) {
        let configuration = configuration
        let environment = environment
        table.add(method, path, on: access == .admin ? admin : authenticated) { request, context in
            try await handler(AppRequest(request: request, context: context, configuration: configuration, environment: environment))
        }
    }
}

/// One request to an app route, read by the engine's rules: the same errors (400 with a stable
/// code) for a bad query, header or path parameter as the sync routes give.
public struct AppRequest: Sendable {
    /// The request as it came.
    public let request: Request
    /// Its context: the authenticated identity, the logger, the path parameters.
    public let context: SyncRequestContext
    let configuration: ServerConfiguration
    let environment: ServerEnvironment

    /// The caller's identity (every app route is behind authentication).
    public func identity() throws(ServiceError) -> DeviceIdentity { try context.requireIdentity() }

    /// A query parameter, percent-decoded; `nil` when absent.
    public func query(_ name: String) -> String? { request.query(name) }

    /// A boolean query parameter: absent or `false` is false, `true` (or `1`) true, anything else a 400.
    public func flag(_ name: String) throws(ServiceError) -> Bool { try RequestInput.flag(name, request) }

    /// The `limit` query parameter: `nil` when absent, else a positive integer (400 otherwise).
    public func limit() throws(ServiceError) -> Int? { try RequestInput.limit(request) }

    /// The device's schema versions (`X-Outpost-Schema`); empty when absent ("the current versions").
    public func schemaVersions() throws(ServiceError) -> [String: Int] { try RequestInput.schema(request) }

    /// A path parameter, percent-decoded once and held to the identifier rule (NFC).
    public func parameter(_ name: String) throws(ServiceError) -> String { try RequestInput.parameter(name, context) }

    /// The body, at most `limit` bytes (413 past it).
    public func body(limit: Int) async throws -> Data { try await request.collectBody(limit: limit) }

    /// Where clients reach this server for links the app hands out: the configured public URL
    /// (`--public-url`), else the address this connection reached (`https` when the server
    /// serves TLS itself); never the `Host` header.
    public var baseURL: String { RequestInput.baseURL(configuration, context) }

    /// A stored file (a `file` field's, by its SHA-256) streamed from the blob store, as
    /// `GET /sync/v1/files/{sha256}` serves it: 404 unless the caller may read it (it may read a
    /// row naming it, or uploaded it); its SHA-256 as a strong `ETag`, `If-None-Match` (304) and
    /// single byte ranges (206, 416), for `GET` and `HEAD`.
    ///
    /// - Parameters:
    ///   - sha256: the file's SHA-256, as a `file` field's reference names it.
    ///   - contentType: the `Content-Type` to answer with instead of the file's own.
    ///   - cacheControl: the `Cache-Control` to answer with instead of the files route's
    ///     (`immutable`), for a route whose answer may change (an id that names another file later).
    public func storedFile(sha256: String, contentType: String? = nil, cacheControl: String? = nil) async throws -> Response {
        let files = FileService(
            storage: environment.storage.engine, blobs: environment.storage.engine.defaultBlobStore, limits: configuration.files,
            clock: environment.clock)
        var file = try await files.readable(sha256, identity: try identity())
        if let contentType { file.contentType = contentType }
        var response = try await FileDownload.response(for: file, blobs: files.blobs, request: request)
        if let cacheControl { response.headers[.cacheControl] = cacheControl }
        return response
    }

    /// A JSON answer, keys sorted; gzip-compressed when `compressible` and the client takes it.
    public func json(_ value: some Encodable, status: HTTPResponse.Status = .ok, compressible: Bool = false) throws -> Response {
        try .json(value, status: status, request: request, compressible: compressible)
    }
}

/// How the routes read their input: one set of rules for the sync routes and the apps' routes.
enum RequestInput {
    /// `X-Outpost-Schema` at most, in bytes: far more than any app's contracts take (16 KiB).
    static let maximumSchemaHeaderBytes = 16_384
    /// Contracts one `X-Outpost-Schema` may name at most (256).
    static let maximumSchemaEntries = 256
    /// A contract name's length at most, in `X-Outpost-Schema` as in a push (128 bytes).
    static let maximumContractNameBytes = 128

    /// `X-Outpost-Schema: Unit=3,Lesson=2`; absent means "the current versions". Bounded before
    /// it is read (``maximumSchemaHeaderBytes``, ``maximumSchemaEntries``) and each name held to
    /// the identifier rule (``Identifier``): an absurd header is a 400, never a table to keep.
    static func schema(_ request: Request) throws(ServiceError) -> [String: Int] {
        guard let text = request.headers[.outpostSchema], !text.trimmingCharacters(in: .whitespaces).isEmpty else { return [:] }
        guard text.utf8.count <= maximumSchemaHeaderBytes else {
            throw .malformed("\(ProtocolHeaders.schema) is longer than \(maximumSchemaHeaderBytes) bytes")
        }
        guard let versions = SchemaHeader.decode(text) else {
            throw .malformed("\(ProtocolHeaders.schema) must be `Name=version` pairs separated by commas, like `Unit=3,Lesson=2`")
        }
        guard versions.count <= maximumSchemaEntries else {
            throw .malformed("\(ProtocolHeaders.schema) names \(versions.count) contracts; at most \(maximumSchemaEntries) are read")
        }
        for name in versions.keys {
            try Identifier.require(name, as: "a contract name in \(ProtocolHeaders.schema)", maximumBytes: maximumContractNameBytes)
        }
        return versions
    }

    static func limit(_ request: Request) throws(ServiceError) -> Int? {
        guard let text = request.query("limit"), !text.isEmpty else { return nil }
        guard let value = Int(text), value > 0 else { throw .malformed("`limit` must be a positive integer, not `\(text)`") }
        return value
    }

    /// A boolean query parameter: absent, `false` or `0` is false, `true` or `1` true, anything else a 400.
    static func flag(_ name: String, _ request: Request) throws(ServiceError) -> Bool {
        switch request.query(name)?.lowercased() {
        case nil, "", "false", "0": return false
        case "true", "1": return true
        case let other?: throw .malformed("`\(name)` must be `true` or `false`, not `\(other)`")
        }
    }

    /// A path parameter, percent-decoded once (the router hands them over as sent: `jos%C3%A9`
    /// names the user `josé`, `field%20ops` the team `field ops`) and held to the identifier rule.
    static func parameter(_ name: String, _ context: SyncRequestContext) throws(ServiceError) -> String {
        guard let raw = context.parameters.get(name), !raw.isEmpty else { throw .malformed("the path needs `\(name)`") }
        guard let value = raw.removingPercentEncoding, !value.isEmpty else {
            throw .malformed("the path's `\(name)` is not valid percent-encoded UTF-8: `\(raw)`")
        }
        try Identifier.require(value, as: name)
        return value
    }

    /// Where clients reach the server: the configured public URL, or the address this
    /// connection reached, `https` when the server serves TLS itself (``ServerConfiguration/tls``).
    /// Never the request's `Host` header: a client (or anything between it and the server)
    /// chooses that, and links built from it would point wherever it says.
    static func baseURL(_ configuration: ServerConfiguration, _ context: SyncRequestContext) -> String {
        if let base = configuration.publicBaseURL {
            return base.hasSuffix("/") ? String(base.dropLast()) : base
        }
        let scheme = configuration.tls == nil ? "http" : "https"
        if let local = context.localAddress, let ip = local.ipAddress, let port = local.port {
            return "\(scheme)://\(ip.contains(":") ? "[\(ip)]" : ip):\(port)"
        }
        return "\(scheme)://\(configuration.host):\(configuration.port)"
    }
}
