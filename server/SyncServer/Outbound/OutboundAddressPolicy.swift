import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A CIDR block (`10.0.0.0/8`, `127.0.0.1/32`, `fd00::/8`, or a bare address): an entry of
/// ``ServerConfiguration/outboundAllowList`` (`serve --outbound-allow`) and of
/// ``ServerConfiguration/trustedProxies``.
public typealias CIDRBlock = TrustedProxies.Block

/// Where the server's own requests (sinks' deliveries and replays, JWKS fetches) may go.
///
/// A URL an admin gives could name the server's own machine, its cloud metadata service or the
/// private network behind it (server-side request forgery). Every outbound connection resolves
/// its host here first and connects only to an address checked here (``OutboundHTTP``), so a DNS
/// answer that changes between the check and the connection cannot slip through: loopback,
/// link-local, private (RFC 1918, `fc00::/7`), shared (CGNAT `100.64.0.0/10`), unspecified,
/// multicast, broadcast and reserved addresses, and the addresses of this machine's own
/// interfaces, are refused unless ``allowList`` names them.
package struct OutboundAddressPolicy: Sendable {
    /// Blocks an operator allows although they are refused otherwise (the tests' loopback
    /// receivers, a webhook on the private network).
    package var allowList: [CIDRBlock]
    /// How a host name becomes addresses (the system resolver; tests give their own).
    package var resolver: Resolver

    package init(allowList: [CIDRBlock] = [], resolver: Resolver = .system) {
        self.allowList = allowList
        self.resolver = resolver
    }

    /// Turns a host name into the addresses (4 or 16 bytes each) a connection may use.
    package struct Resolver: Sendable {
        package var resolve: @Sendable (_ host: String) async throws -> [[UInt8]]

        package init(_ resolve: @escaping @Sendable (_ host: String) async throws -> [[UInt8]]) {
            self.resolve = resolve
        }

        /// `getaddrinfo`, on a thread of its own (it blocks): the same reading of a host as the
        /// system's, numeric forms such as `2130706433` and `0x7f.1` included.
        package static let system = Resolver { host in
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(with: Result { try OutboundAddressPolicy.systemResolution(of: host) })
                }
            }
        }
    }

    /// Why an address is refused.
    package enum Refusal: String, Sendable, Equatable, CaseIterable {
        case loopback
        case linkLocal = "link-local"
        case `private`
        case sharedAddressSpace = "shared address space (CGNAT)"
        case unspecified
        case multicast
        case broadcast
        case reserved
        case localInterface = "an address of this machine"
    }

    /// Why `address` (4 or 16 bytes) is refused by its kind alone, whatever the allow-list;
    /// `nil` for a public address. IPv4 in IPv6 (`::ffff:a.b.c.d`, `::a.b.c.d`, `64:ff9b::/96`,
    /// `2002::/16`) is judged by the IPv4 address it carries.
    package static func classify(_ address: [UInt8]) -> Refusal? {
        if address.count == 4 { return classifyIPv4(address) }
        guard address.count == 16 else { return .reserved }
        if let embedded = embeddedIPv4(address) { return classifyIPv4(embedded) }
        if address.allSatisfy({ $0 == 0 }) { return .unspecified }
        if address[0..<15].allSatisfy({ $0 == 0 }), address[15] == 1 { return .loopback }
        if address[0] == 0xFF { return .multicast }
        if address[0] == 0xFE, address[1] & 0xC0 == 0x80 { return .linkLocal }  // fe80::/10
        if address[0] == 0xFE, address[1] & 0xC0 == 0xC0 { return .private }  // fec0::/10, site-local (deprecated)
        if address[0] & 0xFE == 0xFC { return .private }  // fc00::/7, unique local
        if address[0..<12].allSatisfy({ $0 == 0 }) { return .reserved }  // ::/96 not caught above
        return nil
    }

    private static func classifyIPv4(_ a: [UInt8]) -> Refusal? {
        switch (a[0], a[1]) {
        case (0, _): return .unspecified  // 0.0.0.0/8: "this network"; 0.0.0.0 reaches this machine
        case (127, _): return .loopback
        case (10, _): return .private
        case (172, 16...31): return .private
        case (192, 168): return .private
        case (169, 254): return .linkLocal
        case (100, 64...127): return .sharedAddressSpace
        case (192, 0) where a[2] == 0: return .reserved  // 192.0.0.0/24, IETF protocol assignments
        case (198, 18...19): return .reserved  // benchmarking
        case (224...239, _): return .multicast
        case (255, 255) where a[2] == 255 && a[3] == 255: return .broadcast
        case (240...255, _): return .reserved
        default: return nil
        }
    }

    /// The IPv4 address an IPv6 address carries, for the forms that reach it: IPv4-mapped
    /// (`::ffff:0:0/96`), IPv4-compatible (`::/96`, not `::` or `::1`), NAT64 (`64:ff9b::/96`)
    /// and 6to4 (`2002::/16`).
    static func embeddedIPv4(_ address: [UInt8]) -> [UInt8]? {
        guard address.count == 16 else { return nil }
        if address[0..<10].allSatisfy({ $0 == 0 }), address[10] == 0xFF, address[11] == 0xFF { return Array(address[12..<16]) }
        if address[0..<12].allSatisfy({ $0 == 0 }), address[12] != 0 || address[13] != 0 { return Array(address[12..<16]) }
        if address[0..<12] == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] { return Array(address[12..<16]) }
        if address[0] == 0x20, address[1] == 0x02 { return Array(address[2..<6]) }
        return nil
    }

    /// Why `address` may not be connected to, or `nil` when it may: refused by its kind (or as
    /// one of `localAddresses`) and not in ``allowList`` (an IPv6 address carrying IPv4 is
    /// allowed when either form is listed).
    package func refusal(of address: [UInt8], localAddresses: Set<[UInt8]> = OutboundAddressPolicy.localAddresses()) -> Refusal? {
        let kind = Self.classify(address) ?? (localAddresses.contains(address) ? .localInterface : nil)
        guard let kind else { return nil }
        let forms = [address] + (Self.embeddedIPv4(address).map { [$0] } ?? [])
        return allowList.contains { block in forms.contains { block.contains($0) } } ? nil : kind
    }

    /// The address a host written as an address stands for, in any form the system resolver
    /// reads one (`127.0.0.1`, `2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`, `[::1]`,
    /// `::ffff:127.0.0.1`); `nil` for a name.
    package static func literalAddress(_ host: String) -> [UInt8]? {
        var text = host
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if text.contains(":") {
            // A zone (`fe80::1%eth0`) does not change the address's kind.
            let bare = String(text.split(separator: "%", maxSplits: 1).first ?? "")
            var v6 = in6_addr()
            guard inet_pton(AF_INET6, bare, &v6) == 1 else { return nil }
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return ipv4(inetAton: text)
    }

    /// An IPv4 address as `inet_aton` reads it: one to four parts separated by dots, each
    /// decimal, octal (a leading `0`) or hexadecimal (`0x`); the last part fills the bytes left.
    static func ipv4(inetAton text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var values: [UInt64] = []
        for part in parts {
            let lower = part.lowercased()
            let value: UInt64?
            if lower.hasPrefix("0x") {
                let digits = lower.dropFirst(2)
                value = digits.isEmpty ? 0 : (digits.count <= 16 ? UInt64(digits, radix: 16) : nil)
            } else if lower.hasPrefix("0"), lower.count > 1 {
                value = lower.count <= 23 ? UInt64(lower.dropFirst(), radix: 8) : nil
            } else {
                value = lower.count <= 20 ? UInt64(lower, radix: 10) : nil
            }
            guard let value, !part.isEmpty else { return nil }
            values.append(value)
        }
        let leading = values.dropLast()
        guard leading.allSatisfy({ $0 <= 0xFF }) else { return nil }
        let remainingBytes = 4 - leading.count
        guard let last = values.last, last < (UInt64(1) << (8 * UInt64(remainingBytes))) else { return nil }
        var bytes = leading.map { UInt8($0) }
        for index in stride(from: remainingBytes - 1, through: 0, by: -1) { bytes.append(UInt8((last >> (8 * UInt64(index))) & 0xFF)) }
        return bytes
    }

    /// Whether a URL's host is refused before anything is resolved: an address (in any form)
    /// that is refused, or a `localhost` name. A name is checked again, resolved, at every
    /// connection.
    package func literalRefusal(host: String) -> Refusal? {
        let lower = host.lowercased()
        if lower == "localhost" || lower.hasSuffix(".localhost") || lower == "localhost." {
            return allowList.contains { $0.contains([127, 0, 0, 1]) } ? nil : .loopback
        }
        guard let address = Self.literalAddress(host) else { return nil }
        return refusal(of: address)
    }

    /// What a checked resolution gives: the address to connect to, as text.
    package struct Checked: Sendable, Equatable {
        package var address: [UInt8]
        package var text: String
    }

    /// Resolves `host` and returns the first of its addresses that may be connected to.
    ///
    /// - Throws: ``OutboundRefusal/refusedAddress(host:address:reason:)`` when every address is
    ///   refused, ``OutboundRefusal/unresolvable(host:)`` when there is none.
    package func check(host: String) async throws(OutboundRefusal) -> Checked {
        let addresses: [[UInt8]]
        if let literal = Self.literalAddress(host) {
            addresses = [literal]
        } else {
            do {
                addresses = try await resolver.resolve(host)
            } catch {
                throw .unresolvable(host: host)
            }
        }
        guard !addresses.isEmpty else { throw .unresolvable(host: host) }
        let local = Self.localAddresses()
        var firstRefusal: (address: [UInt8], reason: Refusal)?
        for address in addresses {
            if let reason = refusal(of: address, localAddresses: local) {
                if firstRefusal == nil { firstRefusal = (address, reason) }
                continue
            }
            return Checked(address: address, text: Self.text(of: address))
        }
        let refused = firstRefusal!
        throw .refusedAddress(host: host, address: Self.text(of: refused.address), reason: refused.reason)
    }

    /// An address as text (`127.0.0.1`, `::1`).
    package static func text(of address: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = address.count == 4 ? AF_INET : AF_INET6
        let written = address.withUnsafeBytes { bytes in inet_ntop(family, bytes.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard written != nil else {
            return address.count == 4 ? address.map(String.init).joined(separator: ".") : TrustedProxies.text(ofIPv6: address)
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The addresses of this machine's interfaces (its public address among them: a sink at
    /// the server's own public address reaches its own routes).
    package static func localAddresses() -> Set<[UInt8]> {
        var result = Set<[UInt8]>()
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return result }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            if let address = entry.pointee.ifa_addr, let bytes = Self.bytes(of: address) { result.insert(bytes) }
            cursor = entry.pointee.ifa_next
        }
        return result
    }

    private static func bytes(of address: UnsafePointer<sockaddr>) -> [UInt8]? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                var value = pointer.pointee.sin_addr
                return withUnsafeBytes(of: &value) { Array($0) }
            }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                var value = pointer.pointee.sin6_addr
                return withUnsafeBytes(of: &value) { Array($0) }
            }
        default:
            return nil
        }
    }

    /// The addresses `getaddrinfo` gives for `host`, in its order, without duplicates.
    static func systemResolution(of host: String) throws -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let first = list else { throw OutboundRefusal.unresolvable(host: host) }
        defer { freeaddrinfo(list) }
        var addresses: [[UInt8]] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let address = entry.pointee.ai_addr, let bytes = Self.bytes(of: address), !addresses.contains(bytes) { addresses.append(bytes) }
            cursor = entry.pointee.ai_next
        }
        return addresses
    }
}

/// Why an outbound request was not sent.
package enum OutboundRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// The host is, or resolves only to, addresses the policy refuses.
    case refusedAddress(host: String, address: String, reason: OutboundAddressPolicy.Refusal)
    /// The host has no address.
    case unresolvable(host: String)

    package var description: String {
        switch self {
        case .refusedAddress(let host, let address, let reason):
            "\(host) is \(address == host ? "" : "at \(address), ")\(reason.rawValue), which outbound requests may not reach unless --outbound-allow names it"
        case .unresolvable(let host): "\(host) cannot be resolved"
        }
    }
}
