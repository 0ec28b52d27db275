public import Hummingbird

/// Requires `Authorization: Bearer <token>` and puts the verified identity in the context.
/// A request without a valid token goes no further: nothing reads its body or writes anything.
public struct AuthenticationMiddleware: RouterMiddleware {
    public typealias Context = SyncRequestContext

    let signer: TokenSigner
    let clock: any ServerClock

    public init(signer: TokenSigner, clock: any ServerClock = SystemClock()) {
        self.signer = signer
        self.clock = clock
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.identity = try authenticate(request.headers[.authorization])
        return try await next(request, context)
    }

    func authenticate(_ header: String?) throws(ServiceError) -> DeviceIdentity {
        guard let header, !header.isEmpty else {
            throw .unauthorized("missing token: send Authorization: Bearer <token>")
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw .unauthorized("the Authorization header must be `Bearer <token>`")
        }
        let now = clock.now().millisecondsSince1970 / 1000
        return try signer.verify(parts[1].trimmingCharacters(in: .whitespaces), now: now)
    }
}

/// Lets only admin tokens through; devices get 403.
public struct AdminOnlyMiddleware: RouterMiddleware {
    public typealias Context = SyncRequestContext

    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard try context.requireIdentity().isAdmin else {
            throw ServiceError.forbidden("\(request.uri.path) needs an admin token; device tokens cannot publish content")
        }
        return try await next(request, context)
    }
}
