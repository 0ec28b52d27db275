import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Fetches a fleet census over HTTP for `check --fleet-url`: one GET with a bearer token,
/// waited for synchronously, as the rest of the command runs.
enum CensusDownload {
    /// The longest the whole fetch may take.
    static let timeout: TimeInterval = 30

    /// Why there is no census: completes `GET URL …` in the error line.
    struct Failure: Error {
        var message: String
    }

    /// The body of a 2xx answer to `GET url` with `Authorization: Bearer token`.
    static func fetch(_ url: URL, token: String) throws(Failure) -> Data {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }

        let answer = Answer()
        let done = DispatchSemaphore(value: 0)
        let task = session.dataTask(with: request) { data, response, error in
            answer.set(data: data, response: response, error: error)
            done.signal()
        }
        task.resume()
        // The session's own timeout ends the task first; this only guards against a task that never completes.
        guard done.wait(timeout: .now() + timeout + 5) == .success else {
            task.cancel()
            throw Failure(message: "had no answer within \(Int(timeout)) s")
        }
        let (data, response, error) = answer.get()
        if let error { throw Failure(message: "failed: \(describe(error, host: url.host ?? ""))") }
        guard let status = (response as? HTTPURLResponse)?.statusCode else { throw Failure(message: "had no HTTP answer") }
        guard (200..<300).contains(status) else {
            let reason = HTTPURLResponse.localizedString(forStatusCode: status)
            throw Failure(message: "answered \(status) \(reason)" + (errorMessage(in: data).map { ": \($0)" } ?? ""))
        }
        return data ?? Data()
    }

    /// `error.message` of the server's error body (`{"error": {"code", "message"}}`), if it is one.
    private static func errorMessage(in body: Data?) -> String? {
        guard let body, let document = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let error = document["error"] as? [String: Any], let message = error["message"] as? String, !message.isEmpty
        else { return nil }
        return message
    }

    /// The failures a CI log meets, in words; anything else as Foundation says it.
    private static func describe(_ error: any Error, host: String) -> String {
        guard let error = error as? URLError else { return "\(error.localizedDescription)" }
        switch error.code {
        case .timedOut: return "no answer within \(Int(timeout)) s"
        case .cannotConnectToHost: return "cannot connect to \(host)"
        case .cannotFindHost, .dnsLookupFailed: return "unknown host \(host)"
        case .networkConnectionLost, .notConnectedToInternet: return "the connection to \(host) was lost"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid,
            .serverCertificateHasUnknownRoot:
            return "the TLS connection to \(host) failed"
        default: return "\(error.localizedDescription) (URL error \(error.code.rawValue))"
        }
    }

    /// What the task's completion handler delivered, handed across threads under a lock.
    private final class Answer: @unchecked Sendable {
        // `@unchecked`: every access holds `lock`.
        private let lock = NSLock()
        private var data: Data?
        private var response: URLResponse?
        private var error: (any Error)?

        func set(data: Data?, response: URLResponse?, error: (any Error)?) {
            lock.withLock { (self.data, self.response, self.error) = (data, response, error) }
        }

        func get() -> (Data?, URLResponse?, (any Error)?) {
            lock.withLock { (data, response, error) }
        }
    }
}
