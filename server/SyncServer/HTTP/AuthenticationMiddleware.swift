package import Hummingbird

/// Requires `Authorization: Bearer <token>` and puts the verified identity in the context.
/// A request without a valid token goes no further: nothing reads its body or writes anything.
///
/// After the token's own checks (``TokenSigner/verify(_:now:acceptingExpired:)``), what the server holds about
/// the identity decides, read from storage on every request so it holds at once on every
/// process: a token issued at or before a revocation of its device or user is refused
/// (`token_revoked`), one issued at or before the erasure of its user's data is told so
/// (`410 user_erased`) — each up to ``TokenSigner/issuedAtLeeway`` after them, the margin a
/// token dated ahead of the server's clock may take (``IdentityState``) — and the teams whose
/// scope it may use are the user's memberships, whatever the token says.
package struct AuthenticationMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    let signer: TokenSigner
    let storage: (any SyncStorage)?
    let clock: any ServerClock
    /// A rate limit counted in shared storage, checked while the identity's state is read (two
    /// statements at once rather than one after the other: a round trip less per request).
    let sharedRateLimit: SharedRateLimiter?

    /// - Parameters:
    ///   - signer: verifies the tokens.
    ///   - storage: where revocations and memberships are read; `nil` trusts the token
    ///     alone (for tools that have no server database).
    ///   - clock: the server's time, against which tokens' times and revocations are checked.
    ///   - sharedRateLimit: a per-device limit counted in `storage`, checked at the same time
    ///     as the identity once the token's signature holds (a refused identity still answers
    ///     401 or 410, never 429).
    package init(
        signer: TokenSigner, storage: (any ServerStorage)? = nil, clock: any ServerClock = SystemClock(), sharedRateLimit: SharedRateLimiter? = nil
    ) {
        self.signer = signer
        self.storage = storage?.engine
        self.clock = clock
        self.sharedRateLimit = sharedRateLimit
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let (identity, wait) = try await authenticate(request.headers[.authorization])
        if let sharedRateLimit, let wait { throw RateLimitMiddleware.refusal(identity: identity, limit: sharedRateLimit.limit, wait: wait) }
        context.identity = identity
        // What the routes log about this request names who sent it.
        context.logger[metadataKey: "outpost.tenant"] = .string(identity.tenant)
        context.logger[metadataKey: "outpost.device"] = .string(identity.deviceID)
        return try await next(request, context)
    }

    /// The verified identity, and the seconds to wait when the shared rate limit refuses it.
    func authenticate(_ header: String?) async throws(ServiceError) -> (identity: DeviceIdentity, rateLimitWait: Int?) {
        guard let header, !header.isEmpty else {
            throw ServiceError(status: 401, .tokenMissing, "missing token: send Authorization: Bearer <token>")
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw ServiceError(status: 401, .tokenMalformed, "the Authorization header must be `Bearer <token>`")
        }
        let now = clock.now().millisecondsSince1970 / 1000
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        var identity: DeviceIdentity
        do {
            identity = try await signer.verify(token, now: now)
        } catch  where error.detail.code == .tokenExpired {
            // An expired token of an erased user's device is told of the erasure, not of the
            // expiry: renewing it would otherwise bring back a store the erasure wiped.
            guard let storage, let expired = try? await signer.verify(token, now: now, acceptingExpired: true),
                let state = try? await storage.readOneStatement({
                    try await $0.identityState(tenant: expired.tenant, userID: expired.userID, deviceID: expired.deviceID)
                }),
                let refusal = state.refusal(ofTokenIssuedAt: expired.issuedAt), refusal.detail.code == .userErased
            else { throw error }
            throw refusal
        }
        guard let storage else { return (identity, nil) }
        guard let rateLimit = sharedRateLimit else { return (try await Self.withState(of: identity, from: storage), nil) }
        // Only a shared limit costs a round trip: run it beside the identity's.
        async let wait = rateLimit.acquire(RateLimitMiddleware.key(of: identity))
        let checked = try await Self.withState(of: identity, from: storage)
        return (checked, await wait)
    }

    /// `identity` with what the server holds about it (teams, erasure); refused when revoked
    /// or erased since the token was issued.
    private static func withState(of identity: DeviceIdentity, from storage: any SyncStorage) async throws(ServiceError) -> DeviceIdentity {
        let (tenant, user, device) = (identity.tenant, identity.userID, identity.deviceID)
        let state: IdentityState
        do {
            state = try await storage.readOneStatement { try await $0.identityState(tenant: tenant, userID: user, deviceID: device) }
        } catch {
            if StorageAvailability.isUnavailable(error) { throw ServiceError.storageUnavailable }
            throw ServiceError(status: 503, .internalError, "the server cannot check the token now; try again")
        }
        if let refusal = state.refusal(ofTokenIssuedAt: identity.issuedAt) { throw refusal }
        var identity = identity
        identity.teams = state.teams
        identity.userErasedAt = state.erasedAt
        return identity
    }
}

/// Lets admin and integration tokens through (the change feed); devices get 403.
package struct FeedReaderMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let identity = try context.requireIdentity()
        guard identity.isAdmin || identity.isIntegration else {
            throw ServiceError.forbidden("\(request.uri.path) needs an admin or integration token")
        }
        return try await next(request, context)
    }
}

/// Lets only admin tokens through; devices get 403.
package struct AdminOnlyMiddleware: RouterMiddleware {
    package typealias Context = SyncRequestContext

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard try context.requireIdentity().isAdmin else {
            throw ServiceError.forbidden("\(request.uri.path) needs an admin token; device tokens cannot publish content")
        }
        return try await next(request, context)
    }
}
