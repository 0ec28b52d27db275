import AsyncHTTPClient
import ContractRuntime
import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SyncServer

/// Sinks and JWKS fetches as server-side request forgery (issue 44): an admin's URL at the
/// server's own machine, its metadata service or its private network, in any spelling of the
/// address, is refused when added and, resolved, at every connection; only the operator's
/// allow-list lets one through.
@Suite("Outbound requests refuse loopback, link-local, private and unspecified addresses unless allowed")
struct OutboundAddressTests {
    static func bytes(_ text: String) -> [UInt8] { OutboundAddressPolicy.literalAddress(text)! }

    static func kind(_ text: String) -> OutboundAddressPolicy.Refusal? { OutboundAddressPolicy.classify(bytes(text)) }

    @Test("IPv4 in every form inet_aton reads: decimal, hexadecimal, octal, short")
    func ipv4Forms() {
        for form in ["127.0.0.1", "2130706433", "0x7f000001", "0X7F000001", "0177.0.0.1", "0x7f.0.0.1", "127.1", "127.0.1", "0177.1", "017700000001"]
        {
            #expect(OutboundAddressPolicy.literalAddress(form) == [127, 0, 0, 1], "\(form)")
        }
        #expect(OutboundAddressPolicy.literalAddress("169.254.169.254") == [169, 254, 169, 254])
        #expect(OutboundAddressPolicy.literalAddress("2852039166") == [169, 254, 169, 254], "the metadata service as one number")
        #expect(OutboundAddressPolicy.literalAddress("0xa9fea9fe") == [169, 254, 169, 254])
        #expect(OutboundAddressPolicy.literalAddress("0") == [0, 0, 0, 0])
        #expect(OutboundAddressPolicy.literalAddress("10.1") == [10, 0, 0, 1])
        for name in ["example.com", "127.0.0.1.example.com", "256.0.0.1", "1.2.3.4.5", "4294967296", "08.0.0.1", "1..1", ""] {
            #expect(OutboundAddressPolicy.literalAddress(name) == nil, "\(name) is a name, not an address")
        }
    }

    @Test("IPv6 forms, bracketed or not, with a zone, and IPv4 carried in IPv6")
    func ipv6Forms() {
        #expect(Self.kind("[::1]") == .loopback)
        #expect(Self.kind("::1") == .loopback)
        #expect(Self.kind("0:0:0:0:0:0:0:1") == .loopback)
        #expect(Self.kind("::") == .unspecified)
        #expect(Self.kind("::ffff:127.0.0.1") == .loopback, "IPv4-mapped")
        #expect(Self.kind("::ffff:7f00:1") == .loopback, "IPv4-mapped, in hex")
        #expect(Self.kind("::ffff:169.254.169.254") == .linkLocal)
        #expect(Self.kind("::ffff:10.0.0.1") == .private)
        #expect(Self.kind("::127.0.0.1") == .loopback, "IPv4-compatible")
        #expect(Self.kind("64:ff9b::7f00:1") == .loopback, "NAT64")
        #expect(Self.kind("2002:7f00:1::") == .loopback, "6to4")
        #expect(Self.kind("fe80::1") == .linkLocal)
        #expect(Self.kind("fe80::1%eth0") == .linkLocal)
        #expect(Self.kind("fc00::1") == .private)
        #expect(Self.kind("fd12:3456::1") == .private)
        #expect(Self.kind("fec0::1") == .private, "site-local")
        #expect(Self.kind("ff02::1") == .multicast)
        #expect(Self.kind("2001:4860:4860::8888") == nil, "a public address")
        #expect(Self.kind("::ffff:8.8.8.8") == nil)
    }

    @Test("IPv4 kinds: loopback, link-local, RFC 1918, CGNAT, unspecified, multicast, broadcast; public ones pass")
    func ipv4Kinds() {
        let refused: [(String, OutboundAddressPolicy.Refusal)] = [
            ("127.0.0.1", .loopback), ("127.255.255.254", .loopback), ("0.0.0.0", .unspecified), ("0.1.2.3", .unspecified),
            ("169.254.169.254", .linkLocal), ("169.254.0.1", .linkLocal),
            ("10.0.0.1", .private), ("10.255.255.255", .private), ("172.16.0.1", .private), ("172.31.255.255", .private),
            ("192.168.0.1", .private), ("192.168.255.255", .private),
            ("100.64.0.1", .sharedAddressSpace), ("100.127.255.255", .sharedAddressSpace),
            ("224.0.0.1", .multicast), ("239.255.255.255", .multicast), ("255.255.255.255", .broadcast), ("240.0.0.1", .reserved),
            ("192.0.0.8", .reserved), ("198.18.0.1", .reserved),
        ]
        for (address, kind) in refused { #expect(Self.kind(address) == kind, "\(address)") }
        for address in [
            "8.8.8.8", "1.1.1.1", "172.15.255.255", "172.32.0.1", "192.169.0.1", "100.63.255.255", "100.128.0.1", "169.253.0.1", "11.0.0.1",
        ] {
            #expect(Self.kind(address) == nil, "\(address) is public")
        }
    }

    @Test("the allow-list: CIDR blocks let their addresses through, IPv4-mapped included; nothing else")
    func allowList() {
        let none = OutboundAddressPolicy()
        #expect(none.refusal(of: Self.bytes("127.0.0.1"), localAddresses: []) == .loopback)
        #expect(none.refusal(of: Self.bytes("8.8.8.8"), localAddresses: []) == nil)
        let policy = OutboundAddressPolicy(allowList: [CIDRBlock("127.0.0.1/32")!, CIDRBlock("10.1.0.0/16")!, CIDRBlock("fd00::/8")!])
        #expect(policy.refusal(of: Self.bytes("127.0.0.1"), localAddresses: []) == nil)
        #expect(policy.refusal(of: Self.bytes("::ffff:127.0.0.1"), localAddresses: []) == nil, "the mapped form of an allowed address")
        #expect(policy.refusal(of: Self.bytes("127.0.0.2"), localAddresses: []) == .loopback, "a /32 is one address")
        #expect(policy.refusal(of: Self.bytes("10.1.200.3"), localAddresses: []) == nil)
        #expect(policy.refusal(of: Self.bytes("10.2.0.1"), localAddresses: []) == .private)
        #expect(policy.refusal(of: Self.bytes("fd12::1"), localAddresses: []) == nil)
        #expect(policy.refusal(of: Self.bytes("fc00::1"), localAddresses: []) == .private, "fc00::/8 is not in fd00::/8")
        #expect(policy.refusal(of: Self.bytes("::1"), localAddresses: []) == .loopback)
        #expect(policy.refusal(of: Self.bytes("169.254.169.254"), localAddresses: []) == .linkLocal)
        // This machine's own addresses (its public one among them) are refused like loopback.
        #expect(none.refusal(of: [203, 0, 113, 7], localAddresses: [[203, 0, 113, 7]]) == .localInterface)
        #expect(
            OutboundAddressPolicy(allowList: [CIDRBlock("203.0.113.0/24")!]).refusal(of: [203, 0, 113, 7], localAddresses: [[203, 0, 113, 7]]) == nil)
        #expect(CIDRBlock("10.0.0.0/33") == nil && CIDRBlock("example.com") == nil)
    }

    @Test("a URL's host refused before anything is resolved: every spelling of a refused address, and localhost names")
    func literalRefusals() {
        let policy = OutboundAddressPolicy()
        for host in [
            "127.0.0.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "[::1]", "::1", "::ffff:127.0.0.1", "0.0.0.0", "0", "169.254.169.254",
            "[fe80::1]", "10.0.0.1", "localhost", "LOCALHOST", "api.localhost",
        ] {
            #expect(policy.literalRefusal(host: host) != nil, "\(host)")
        }
        for host in ["example.com", "8.8.8.8", "[2001:4860:4860::8888]", "localhost.example.com"] {
            #expect(policy.literalRefusal(host: host) == nil, "\(host)")
        }
        #expect(OutboundAddressPolicy(allowList: [CIDRBlock("127.0.0.1")!]).literalRefusal(host: "localhost") == nil)
    }

    @Test("a name is resolved and checked at each connection, and the connection goes to the address checked", .blockingWork)
    func resolvedAndPinned() async throws {
        let hits = NIOLockedValueBox<[String]>([])
        let router = Router()
        router.get("/probe") { request, _ in
            hits.withLockedValue { $0.append(request.head.authority ?? "") }
            return "secret-internal-answer"
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            let port = client.port!
            func get(_ url: String, _ policy: OutboundAddressPolicy) async -> Result<OutboundHTTP.Answer, OutboundHTTP.Failure> {
                do {
                    return .success(
                        try await OutboundHTTP.exchange(HTTPClientRequest(url: url), policy: policy, timeout: .seconds(5), bodyLimit: 1024))
                } catch {
                    return .failure(error)
                }
            }
            // `localhost` resolves to loopback: refused, never connected to.
            guard case .failure(let failure) = await get("http://localhost:\(port)/probe", OutboundAddressPolicy()) else {
                Issue.record("localhost was reached")
                return
            }
            #expect(failure.category == "refused_address")
            for spelling in ["127.0.0.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]"] {
                let result = await get("http://\(spelling):\(port)/probe", OutboundAddressPolicy())
                guard case .failure(let failure) = result else { Issue.record("\(spelling) was reached"); continue }
                #expect(failure.category == "refused_address", "\(spelling)")
            }
            #expect(hits.withLockedValue { $0 }.isEmpty, "no refused address was connected to")

            // A name that resolves (here by the test's resolver) to a refused address is refused;
            // the same name, when the answer is an allowed address, reaches that address and no
            // other: the request is sent to the address checked, never to a second lookup (the
            // system resolver knows no `receiver.test`).
            let rebinding = NIOLockedValueBox(0)
            let resolver = OutboundAddressPolicy.Resolver { _ in
                // The first answer is allowed, any later one would be loopback: only the first is used.
                rebinding.withLockedValue { $0 += 1 }
                return rebinding.withLockedValue { $0 } == 1 ? [[127, 0, 0, 1]] : [[127, 0, 0, 2]]
            }
            let allowed = OutboundAddressPolicy(allowList: [CIDRBlock("127.0.0.1/32")!], resolver: resolver)
            guard case .success(let answer) = await get("http://receiver.test:\(port)/probe", allowed) else {
                Issue.record("the allowed, pinned address was not reached")
                return
            }
            #expect(answer.status == 200 && String(buffer: answer.body) == "secret-internal-answer")
            #expect(hits.withLockedValue { $0 } == ["receiver.test:\(port)"], "Host names the URL's host; the connection went to 127.0.0.1")
            #expect(rebinding.withLockedValue { $0 } == 1, "resolved once, by the check")
            let loopbackOnly = OutboundAddressPolicy(resolver: OutboundAddressPolicy.Resolver { _ in [[127, 0, 0, 1], [10, 0, 0, 5]] })
            guard case .failure(let refused) = await get("http://receiver.test:\(port)/probe", loopbackOnly) else {
                Issue.record("a name resolving only to refused addresses was reached")
                return
            }
            #expect(refused.category == "refused_address")
            #expect(hits.withLockedValue { $0 }.count == 1)
        }
    }

    @Test("a JWKS URL at loopback is refused unless the allow-list names it", .blockingWork)
    func jwksRefused() async throws {
        let provider = TestIdentityProvider(maxAge: 60)
        provider.publish([("idp-1", P256.Signing.PrivateKey())])
        try await provider.run { url in
            var signer = try TokenSigner(secret: Data(repeating: 3, count: 32))
            await #expect(throws: TokenKeyError.self) { try await signer.addJWKS(url: url) }
            #expect(provider.hits == 0, "the refused address was never connected to")
            var hexadecimal = URLComponents(url: url, resolvingAgainstBaseURL: false)!
            hexadecimal.host = "0x7f000001"
            await #expect(throws: TokenKeyError.self) { try await signer.addJWKS(url: hexadecimal.url!) }
            #expect(provider.hits == 0)
            try await signer.addJWKS(url: url, outboundAllowList: [CIDRBlock("127.0.0.1/32")!])
            #expect(provider.hits == 1 && signer.acceptedKeys.contains { $0.kid == "idp-1" })
        }
    }
}
