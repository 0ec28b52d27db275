import Foundation
import OutpostTestSupport
import Testing

@testable import SyncServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Silent connections to the TLS port (issue 44: 400 of 400 still open after 71 s; 600 of them
/// with 512 file descriptors made `/health` time out): a connection that has not completed its
/// TLS handshake within the deadline is closed by the server.
@Suite("TLS handshakes have a deadline", .blockingWork)
struct TLSHandshakeTimeoutTests {
    /// A TCP connection to loopback `port` that sends nothing (or only `bytes`), blocking reads
    /// giving up after `readTimeout` seconds.
    static func connect(port: Int, sending bytes: [UInt8] = [], readTimeout: Int = 8) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw SyncServerProcess.Failure("no socket: errno \(errno)") }
        var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(socket)
            throw SyncServerProcess.Failure("cannot connect to \(port): errno \(errno)")
        }
        if !bytes.isEmpty { _ = bytes.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
        return socket
    }

    /// Whether the server closed `socket`: a read ends (EOF or reset) rather than timing out.
    static func closedByServer(_ socket: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
            // An alert or anything else the server sent first: keep reading until it closes.
        }
    }

    @Test("silent TCP connections and a trickled ClientHello are closed after the deadline; a completed handshake is not cut by it")
    func silentConnectionsClosed() async throws {
        let folder = try TemporaryDirectory(prefix: "outpost-tls-handshake")
        let ca = try ThrowawayCA(in: folder.url)
        let h = try await HostileHarness.make(.sqlite) { configuration in
            configuration.tls = TLSFiles(certificateChain: ca.certificateFile, privateKey: ca.keyFile)
            configuration.timeouts.handshake = .seconds(1)
        }
        try await h.serve { server in
            let port = try #require(server.url.port)
            let started = Date()
            var sockets: [Int32] = []
            defer { for socket in sockets { close(socket) } }
            for _ in 0..<50 { sockets.append(try Self.connect(port: port)) }
            // The start of a TLS record (a ClientHello's header), then nothing more.
            sockets.append(try Self.connect(port: port, sending: [0x16, 0x03, 0x01, 0x02, 0x00, 0x01]))
            var closed = 0
            for socket in sockets where Self.closedByServer(socket) { closed += 1 }
            let elapsed = Date().timeIntervalSince(started)
            #expect(closed == sockets.count, "\(closed) of \(sockets.count) silent connections closed")
            #expect(elapsed >= 0.9 && elapsed < 7, "closed at the deadline, not before and not never: \(elapsed) s")

            // A client that completes its handshake, then waits past the handshake deadline
            // (within the headers one) before its request, is served.
            let request = "GET /health HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n"
            let result = try ChildProcess.run(
                tool: "sh",
                [
                    "-c",
                    "(sleep 2.5; printf '\(request)'; sleep 2) | openssl s_client -connect 127.0.0.1:\(port) -servername localhost -alpn http/1.1 -quiet 2>/dev/null",
                ])
            #expect(result.stdout.contains("HTTP/1.1 200"), "\(result)")
        }
    }
}
