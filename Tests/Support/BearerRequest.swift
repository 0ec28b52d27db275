package import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP request with a bearer token, as the tests send what no client of the engine would
/// (raw file routes, admin routes): the status, the headers (names lowercased) and the body.
package enum BearerRequest {
    package struct Answer: Sendable {
        package var status: Int
        package var headers: [String: String]
        package var body: Data
    }

    package static func send(
        _ method: String, _ path: String, to base: URL, token: String, headers: [String: String] = [:], body: Data? = nil
    ) async throws -> Answer {
        var request = URLRequest(url: URL(string: path, relativeTo: base)!)
        request.httpMethod = method
        request.timeoutInterval = 600
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as? HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http?.allHeaderFields ?? [:] { fields["\(name)".lowercased()] = "\(value)" }
        return Answer(status: http?.statusCode ?? 0, headers: fields, body: data)
    }
}
