import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A minimal HTTP/1.1 client over a plain socket to 127.0.0.1, for benchmarks that need the
/// exact bytes a server sent: no automatic decompression, no caching, no redirects
/// (Foundation's `URLSession` inflates gzip bodies on its own, which would hide them).
enum LoopbackHTTP {
    struct Response {
        var status: Int
        /// Header names in lower case.
        var headers: [String: String]
        var body: Data
    }

    /// `GET path` with `Connection: close`; reads until the server closes.
    static func get(port: Int, path: String, headers: [(String, String)]) throws -> Response {
        try request("GET", port: port, path: path, headers: headers)
    }

    /// `method path` with `body` (its `Content-Length` set) and `Connection: close`; reads until
    /// the server closes.
    static func request(_ method: String, port: Int, path: String, headers: [(String, String)], body: Data = Data()) throws -> Response {
        #if canImport(Darwin)
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #else
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard descriptor >= 0 else { throw BenchmarkError("socket(): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }

        var timeout = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))

        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw BenchmarkError("connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }

        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method != "GET" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        let bytes = Array(head.utf8) + Array(body)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw BenchmarkError("send to 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
            sent += count
        }

        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { break }
            guard count > 0 else { throw BenchmarkError("recv from 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
            received.append(contentsOf: buffer[0..<count])
        }
        return try parse(received)
    }

    private static func parse(_ data: Data) throws -> Response {
        guard let end = data.firstRange(of: Data("\r\n\r\n".utf8)) else { throw BenchmarkError("no HTTP header in \(data.count) bytes") }
        let head = String(decoding: data[data.startIndex..<end.lowerBound], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw BenchmarkError("bad status line in \(head.prefix(80))") }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = Data(data[end.upperBound...])
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            body = try unchunk(body)
        } else if let length = headers["content-length"].flatMap({ Int($0) }), length != body.count {
            throw BenchmarkError("Content-Length \(length) but \(body.count) body bytes")
        }
        return Response(status: status, headers: headers, body: body)
    }

    private static func unchunk(_ data: Data) throws -> Data {
        var body = Data()
        var index = data.startIndex
        while true {
            guard let lineEnd = data[index...].firstRange(of: Data("\r\n".utf8)) else { throw BenchmarkError("truncated chunk size") }
            let sizeText = String(decoding: data[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { throw BenchmarkError("bad chunk size") }
            index = lineEnd.upperBound
            if size == 0 { return body }
            guard data.distance(from: index, to: data.endIndex) >= size + 2 else { throw BenchmarkError("truncated chunk") }
            body.append(data[index..<data.index(index, offsetBy: size)])
            index = data.index(index, offsetBy: size + 2)
        }
    }
}
