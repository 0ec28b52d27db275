import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The reverse proxies whose `X-Forwarded-For` the server believes, as CIDR blocks
/// (`10.0.0.0/8`, `127.0.0.1/32`, `fd00::/8`).
///
/// Behind a proxy every connection comes from the proxy: limits kept per address would treat
/// every device as one client (one attacker's bad tokens would lock them all out). For a
/// request from a trusted proxy, the client is the right-most address of `X-Forwarded-For`
/// that is not itself a trusted proxy: the left part of the header is whatever the client sent
/// and proves nothing. A request from any other peer is judged by its own address, whatever
/// it claims.
public struct TrustedProxies: Sendable, Hashable {
    /// One CIDR block: an address and how many leading bits of it match.
    public struct Block: Sendable, Hashable, CustomStringConvertible {
        let address: [UInt8]
        let prefixLength: Int

        /// Reads `10.0.0.0/8`, `::1/128`, or a bare address (a block of one).
        public init?(_ text: String) {
            let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
            guard let first = parts.first, let address = TrustedProxies.bytes(of: first) else { return nil }
            let bits = address.count * 8
            if parts.count == 2 {
                guard let length = Int(parts[1]), (0...bits).contains(length) else { return nil }
                prefixLength = length
            } else {
                prefixLength = bits
            }
            self.address = address
        }

        func contains(_ other: [UInt8]) -> Bool {
            guard other.count == address.count else { return false }
            var remaining = prefixLength
            for (mine, theirs) in zip(address, other) where remaining > 0 {
                let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
                if mine & mask != theirs & mask { return false }
                remaining -= 8
            }
            return true
        }

        /// The block in CIDR notation.
        public var description: String {
            let text = address.count == 4 ? address.map(String.init).joined(separator: ".") : TrustedProxies.text(ofIPv6: address)
            return "\(text)/\(prefixLength)"
        }
    }

    /// The blocks whose addresses are trusted proxies.
    public var blocks: [Block]

    /// A list of the given blocks; none by default, trusting no proxy.
    public init(_ blocks: [Block] = []) {
        self.blocks = blocks
    }

    /// Whether `address` (an IP address as text) lies in a trusted block.
    public func trusts(_ address: String) -> Bool {
        guard !blocks.isEmpty, let bytes = Self.bytes(of: address) else { return false }
        return blocks.contains { $0.contains(bytes) }
    }

    /// The address a request comes from: `peer` itself, or when `peer` is a trusted proxy the
    /// right-most address of `forwardedFor` (its `X-Forwarded-For` values, in order) that is not.
    /// A header that names only trusted proxies gives its left-most address; one that is not
    /// addresses at all leaves the peer.
    public func client(peer: String?, forwardedFor: [String]) -> String? {
        guard let peer, trusts(peer) else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        guard !hops.isEmpty, hops.allSatisfy({ Self.bytes(of: $0) != nil }) else { return peer }
        return hops.last { !trusts($0) } ?? hops.first
    }

    /// The bytes of an IPv4 (4) or IPv6 (16) address.
    static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    static func text(ofIPv6 bytes: [UInt8]) -> String {
        stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":")
    }
}
