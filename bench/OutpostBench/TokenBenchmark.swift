import Crypto
import Foundation
import SyncProtocol
import SyncServer

/// `outpost-bench tokens`: what verifying the server's own HS256 tokens through jwt-kit costs per
/// request, beside the hand-written check the server used before (kept here, and only here, to
/// be compared with).
///
/// 20 000 device tokens (`OUTPOST_BENCH_TOKENS`) of different devices are verified by both, in
/// alternating rounds (7), in the same process: the hand check (split, header JSON, kid, HMAC
/// compared in constant time, claims JSON, audience, times, NFC) and `TokenSigner.verify` (the
/// same checks around jwt-kit's `JWTKeyCollection`). The figure is the median of the rounds'
/// ratios, jwt-kit over hand, and the difference per token; docs/PERFORMANCE.md records the
/// decision it led to. Informational: no bar.
enum TokenBenchmark {
    static let countVariable = "OUTPOST_BENCH_TOKENS"
    static let rounds = 7

    static let benchmark = Benchmark(
        name: "tokens",
        summary: "HS256 device tokens verified through jwt-kit beside the former hand-written check, as a ratio (informational)",
        run: { try run() }
    )

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        let count = Int(ProcessInfo.processInfo.environment[countVariable] ?? "").map { max(100, $0) } ?? 20_000
        let secret = Data(repeating: 7, count: 32)
        let signer = try TokenSigner(secret: secret)
        let now: Int64 = 1_800_000_000
        let tokens = (0..<count).map { index in
            signer.sign(
                DeviceIdentity(tenant: "acme", userID: "user-\(index)", deviceID: "device-\(index)", teams: ["team-1"], expiresAt: now + 3600),
                issuedAt: now)
        }
        let hand = HandVerifier(keys: [signer.keyID: secret], audience: signer.audience)
        result.fact("tokens", "\(count) per round, \(rounds) rounds of each, alternating")

        let (handSamples, kitSamples) = try runBlocking {
            var handSamples = Samples()
            var kitSamples = Samples()
            // One untimed pass of each: jwt-kit's collection is built on first use.
            for token in tokens.prefix(100) {
                _ = hand.verify(token, now: now)
                _ = try await signer.verify(token, now: now)
            }
            let clock = ContinuousClock()
            for _ in 0..<rounds {
                var start = clock.now
                var verified = 0
                for token in tokens where hand.verify(token, now: now) != nil { verified += 1 }
                handSamples.append(Timing.seconds(clock.now - start) / Double(count))
                guard verified == count else { throw BenchmarkError("the hand check refused \(count - verified) tokens") }

                start = clock.now
                for token in tokens { _ = try await signer.verify(token, now: now) }
                kitSamples.append(Timing.seconds(clock.now - start) / Double(count))
            }
            return (handSamples, kitSamples)
        }
        let ratios = zip(kitSamples.values, handSamples.values).map { $0 / $1 }
        let ratio = ratios.sorted()[ratios.count / 2]
        func micro(_ seconds: Double) -> String { Format.fixed(seconds * 1e6, 2) + " µs" }
        result.rows = [
            .init("by hand, per token", median: micro(handSamples.median), min: micro(handSamples.min)),
            .init("through jwt-kit, per token", median: micro(kitSamples.median), min: micro(kitSamples.min)),
            .init(
                "jwt-kit / hand", median: Format.fixed(ratio, 2) + "×",
                note: "+" + micro(kitSamples.median - handSamples.median) + " per request"),
        ]
        return result
    }
}

/// The HS256 check `TokenSigner` did by hand before every token went through jwt-kit.
private struct HandVerifier: Sendable {
    let keys: [String: Data]
    let audience: String

    struct Header: Decodable {
        var alg: String?
        var kid: String?
    }

    struct Claims: Decodable {
        var sub: String
        var tenant: String
        var device: String
        var teams: [String]?
        var exp: Int64
        var iat: Int64
        var aud: String
    }

    func verify(_ token: String, now: Int64) -> DeviceIdentity? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count <= 8192, parts.count == 3, let headerData = Self.decode(parts[0]),
            let header = try? JSONDecoder().decode(Header.self, from: headerData), header.alg == "HS256", let kid = header.kid,
            let secret = keys[kid], let signature = Self.decode(parts[2]),
            HMAC<SHA256>.isValidAuthenticationCode(
                signature, authenticating: Data((parts[0] + "." + parts[1]).utf8), using: SymmetricKey(data: secret)),
            let payload = Self.decode(parts[1]), let claims = try? JSONDecoder().decode(Claims.self, from: payload),
            claims.aud == audience, now < claims.exp, claims.iat <= now + TokenSigner.issuedAtLeeway,
            ([claims.tenant, claims.sub, claims.device] + (claims.teams ?? [])).allSatisfy({ UnicodeIdentifier.isNormalized($0) })
        else { return nil }
        return DeviceIdentity(
            tenant: claims.tenant, userID: claims.sub, deviceID: claims.device, teams: claims.teams ?? [], expiresAt: claims.exp, issuedAt: claims.iat
        )
    }

    static func decode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
