import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One HTTP exchange over a plain socket, for requests no HTTP client would send (a bad
/// `Transfer-Encoding`, headers trickled byte by byte).
package enum RawHTTP {
    package struct SocketError: Error, CustomStringConvertible {
        package var description: String
    }

    /// Connects to 127.0.0.1:`port` and returns the socket.
    package static func connect(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(description: "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw SocketError(description: "connect() to port \(port) failed")
        }
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return descriptor
    }

    /// Sends `bytes` whole (a body, or a part of one).
    package static func send(bytes: some Collection<UInt8>, on descriptor: Int32) {
        let bytes = Array(bytes)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }
            sent += count
        }
    }

    package static func send(_ text: String, on descriptor: Int32) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Everything the server sends until it closes the connection or `timeout` passes without
    /// a byte (then `closed` is false).
    package static func receive(on descriptor: Int32) -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (String(decoding: received, as: UTF8.self), true) }
            if count < 0 { return (String(decoding: received, as: UTF8.self), errno == ECONNRESET) }
            received.append(contentsOf: buffer[0..<count])
        }
    }

    /// Sends `request` whole and returns what came back.
    package static func exchange(_ request: String, port: Int) async throws -> String {
        try await onOwnThread {
            let descriptor = try connect(port: port)
            defer { close(descriptor) }
            send(request, on: descriptor)
            shutdown(descriptor, Int32(SHUT_WR))
            return receive(on: descriptor).text
        }
    }

    /// Runs blocking socket work on a thread of its own: blocking one of the few threads of
    /// Swift's concurrency pool would stall every other test (and the server's handlers) meanwhile.
    package static func onOwnThread<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }
}
