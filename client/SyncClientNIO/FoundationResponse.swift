public import Foundation
import NIOHTTP1
import SyncClient

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

extension HTTPURLResponse {
    /// A NIO answer's status and headers as Foundation's response for `url`, repeated fields
    /// joined with commas: what both exchanges hand `URLSessionTransport`.
    static func answering(_ url: URL, status: HTTPResponseStatus, headers: HTTPHeaders) throws(TransportError) -> HTTPURLResponse {
        var fields: [String: String] = [:]
        for (name, value) in headers {
            fields[name] = fields[name].map { "\($0), \(value)" } ?? value
        }
        guard let response = HTTPURLResponse(url: url, statusCode: Int(status.code), httpVersion: "HTTP/1.1", headerFields: fields)
        else { throw .network("not an HTTP response") }
        return response
    }
}
