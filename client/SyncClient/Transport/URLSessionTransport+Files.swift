public import Foundation
public import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The file routes (SyncProtocol's `FileRoutes`), through the same session or exchange, token
/// and `X-Outpost-App` as the sync routes. Each request carries one chunk at most, so memory
/// stays flat whatever the file's size.
extension URLSessionTransport {
    public func startFileUpload(_ request: FileUploadRequest) async throws(TransportError) -> FileUploadAnswer {
        var urlRequest = makeRequest(path: String(FileRoutes.files.dropFirst()), query: [])
        urlRequest.httpMethod = "POST"
        urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        do {
            urlRequest.httpBody = try JSONEncoder().encode(request)
        } catch {
            throw .decoding("encoding the file upload: \(error)")
        }
        return try await send(urlRequest, as: FileUploadAnswer.self)
    }

    public func fileUploadOffset(uploadID: String) async throws(TransportError) -> Int64 {
        var request = makeRequest(path: String(FileRoutes.upload(uploadID).dropFirst()), query: [])
        request.httpMethod = "HEAD"
        let (data, http) = try await fileExchange(request)
        guard (200..<300).contains(http.statusCode) else {
            throw Self.error(status: http.statusCode, data: data, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        }
        guard let offset = http.value(forHTTPHeaderField: FileRoutes.uploadOffset).flatMap({ Int64($0) }) else {
            throw .decoding("the upload's answer has no \(FileRoutes.uploadOffset)")
        }
        return offset
    }

    public func sendFileBytes(_ bytes: Data, uploadID: String, offset: Int64) async throws(TransportError) -> FileChunkAnswer {
        var request = makeRequest(path: String(FileRoutes.upload(uploadID).dropFirst()), query: [])
        request.httpMethod = "PATCH"
        request.setValue(FileRoutes.offsetContentType, forHTTPHeaderField: "Content-Type")
        request.setValue(String(offset), forHTTPHeaderField: FileRoutes.uploadOffset)
        request.httpBody = bytes
        let (data, http) = try await fileExchange(request)
        let answered = http.value(forHTTPHeaderField: FileRoutes.uploadOffset).flatMap { Int64($0) }
        if (200..<300).contains(http.statusCode) {
            guard let answered else { throw .decoding("the upload's answer has no \(FileRoutes.uploadOffset)") }
            return .accepted(offset: answered)
        }
        let error = Self.error(status: http.statusCode, data: data, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        if case .http(409, let body, _) = error, body?.error.code == .offsetMismatch, let answered {
            return .offsetMismatch(serverOffset: answered)
        }
        throw error
    }

    public func fileBytes(sha256: String, range: ClosedRange<Int64>) async throws(TransportError) -> FileChunk {
        var request = makeRequest(path: String(FileRoutes.file(sha256).dropFirst()), query: [])
        request.httpMethod = "GET"
        request.setValue("*/*", forHTTPHeaderField: "Accept")
        // A range of the file's own bytes: never re-encoded on the way.
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        request.setValue("bytes=\(range.lowerBound)-\(range.upperBound)", forHTTPHeaderField: "Range")
        let (data, http) = try await fileExchange(request)
        switch http.statusCode {
        case 206:
            guard let contentRange = http.value(forHTTPHeaderField: "Content-Range"),
                let (start, total) = Self.parseFileContentRange(contentRange)
            else { throw .decoding("a 206 without a Content-Range of bytes") }
            return FileChunk(start: start, data: data, totalSize: total)
        case 200..<300:
            return FileChunk(start: 0, data: data, totalSize: Int64(data.count))
        default:
            throw Self.error(status: http.statusCode, data: data, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        }
    }

    /// The file's bytes from `offset` as ONE request (`Range: bytes=<offset>-`, never
    /// re-encoded), each piece handed to `sink` as it arrives: through ``exchange``'s
    /// ``HTTPExchange/stream(_:)`` when there is an exchange (`nil` when it cannot stream), else
    /// a data task on a session of its own whose delegate receives the body. A `206` from
    /// `offset` or a `200` (the whole file, from 0) is read; any other status is its typed error
    /// (a 401 asks for a fresh token once).
    public func streamFileBytes(
        sha256: String, from offset: Int64, into sink: @escaping @Sendable (FileChunk) throws -> Void
    ) async throws(TransportError) -> FileStreamAnswer? {
        var request = makeRequest(path: String(FileRoutes.file(sha256).dropFirst()), query: [])
        request.httpMethod = "GET"
        request.setValue("*/*", forHTTPHeaderField: "Accept")
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        request.setValue("bytes=\(offset)-", forHTTPHeaderField: "Range")
        if let appVersion { request.setValue(appVersion, forHTTPHeaderField: ProtocolHeaders.appVersion) }
        var refresh = false
        while true {
            var attempt = request
            try await authorize(&attempt, refresh: refresh)
            let outcome: FileStreamOutcome
            if let exchange {
                guard let (response, body) = try await exchange.stream(attempt) else { return nil }
                outcome = await Self.readFileStream(response: response, body: body, offset: offset, sink: sink)
            } else {
                outcome = await FileStreamConnection(request: attempt, offset: offset, timeout: timeout, sink: sink).run()
            }
            switch outcome {
            case .finished(let answer):
                return answer
            case .refused(let status, let data, let retryAfter):
                if status == 401, !refresh {
                    refresh = true
                    continue
                }
                throw Self.error(status: status, data: data, retryAfter: retryAfter)
            case .failed(let error):
                throw error
            }
        }
    }

    /// Where a streamed answer's body starts and the file's size: `206` with a `Content-Range`
    /// from `offset`, or `200` (from 0); `nil` for any other status.
    static func fileStreamStart(_ http: HTTPURLResponse, offset: Int64) throws(TransportError) -> (start: Int64, total: Int64?)? {
        switch http.statusCode {
        case 206:
            guard let contentRange = http.value(forHTTPHeaderField: "Content-Range"),
                let (start, total) = parseFileContentRange(contentRange)
            else { throw .decoding("a 206 without a Content-Range of bytes") }
            guard start == offset else { throw .decoding("the server answered bytes from \(start), not \(offset)") }
            return (start, total)
        case 200..<300:
            let length = http.expectedContentLength
            return (0, length >= 0 ? length : nil)
        default:
            return nil
        }
    }

    /// An exchange's streamed answer read into `sink` (an error answer's body gathered instead).
    static func readFileStream(
        response: HTTPURLResponse, body: AsyncThrowingStream<Data, any Error>, offset: Int64, sink: @Sendable (FileChunk) throws -> Void
    ) async -> FileStreamOutcome {
        let range: (start: Int64, total: Int64?)?
        do {
            range = try fileStreamStart(response, offset: offset)
        } catch {
            return .failed(error)
        }
        guard let (start, total) = range else {
            var data = Data()
            do {
                for try await piece in body {
                    data.append(piece)
                    if data.count > 64 * 1024 { break }
                }
            } catch {
                // The status is the answer.
            }
            return .refused(status: response.statusCode, body: data, retryAfter: response.value(forHTTPHeaderField: "Retry-After"))
        }
        var position = start
        do {
            for try await piece in body where !piece.isEmpty {
                do {
                    try sink(FileChunk(start: position, data: piece, totalSize: total))
                } catch {
                    return .failed(.network("the download was stopped: \(error)"))
                }
                position += Int64(piece.count)
            }
        } catch {
            return .failed(.network(String(describing: error)))
        }
        return .finished(FileStreamAnswer(start: start, totalSize: total, receivedBytes: position - start))
    }

    public func abandonFileUpload(uploadID: String) async throws(TransportError) {
        var request = makeRequest(path: String(FileRoutes.upload(uploadID).dropFirst()), query: [])
        request.httpMethod = "DELETE"
        let (data, http) = try await fileExchange(request)
        // Gone already (finished, expired, dropped): nothing left to free.
        guard (200..<300).contains(http.statusCode) || http.statusCode == 404 || http.statusCode == 410 else {
            throw Self.error(status: http.statusCode, data: data, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        }
    }

    /// `bytes 0-99/1234` as its start and total (`nil` when `*`).
    static func parseFileContentRange(_ text: String) -> (start: Int64, total: Int64?)? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("bytes ") else { return nil }
        let parts = trimmed.dropFirst(6).split(separator: "/", maxSplits: 1)
        guard parts.count == 2, let dash = parts[0].firstIndex(of: "-"), let start = Int64(parts[0][..<dash]) else { return nil }
        return (start, Int64(parts[1]))
    }

    /// One request with the token (again with a fresh one after a 401) and `X-Outpost-App`,
    /// answered whatever its status, with its headers.
    func fileExchange(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse) {
        var request = request
        if let appVersion { request.setValue(appVersion, forHTTPHeaderField: ProtocolHeaders.appVersion) }
        var refresh = false
        while true {
            var attempt = request
            try await authorize(&attempt, refresh: refresh)
            let (data, http) = try await perform(attempt)
            if http.statusCode == 401, !refresh {
                refresh = true
                continue
            }
            return (data, http)
        }
    }
}

/// How a streamed file download went.
enum FileStreamOutcome: Sendable {
    case finished(FileStreamAnswer)
    case refused(status: Int, body: Data, retryAfter: String?)
    case failed(TransportError)
}

/// One streamed file download on a URLSession of its own: hands each piece of the body to the
/// sink as it arrives (on the session's serial delegate queue, so the disk paces the reads);
/// a sink that throws, or the calling task cancelled, cancels the request.
final class FileStreamConnection: NSObject, URLSessionDataDelegate, Sendable {
    private struct State {
        var session: URLSession?
        var task: URLSessionDataTask?
        var continuation: CheckedContinuation<FileStreamOutcome, Never>?
        var range: (start: Int64, total: Int64?)?
        var position: Int64 = 0
        var refusal: (status: Int, body: Data, retryAfter: String?)?
        var failure: TransportError?
        var cancelled = false
    }

    private let request: URLRequest
    private let offset: Int64
    private let timeout: TimeInterval
    private let sink: @Sendable (FileChunk) throws -> Void
    private let state = Locked(State())

    init(request: URLRequest, offset: Int64, timeout: TimeInterval, sink: @escaping @Sendable (FileChunk) throws -> Void) {
        self.request = request
        self.offset = offset
        self.timeout = timeout
        self.sink = sink
    }

    func run() async -> FileStreamOutcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let configuration = URLSessionConfiguration.ephemeral
                // Idle time between pieces; the whole file may take as long as it takes.
                configuration.timeoutIntervalForRequest = timeout
                configuration.timeoutIntervalForResource = 7 * 24 * 3600
                configuration.urlCache = nil
                let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
                let task = session.dataTask(with: request)
                let cancelled = state.withLock { state in
                    state.continuation = continuation
                    state.session = session
                    state.task = task
                    return state.cancelled
                }
                if cancelled {
                    finish(.failed(.network("the download was cancelled")))
                } else {
                    task.resume()
                }
            }
        } onCancel: {
            let started = state.withLock { state in
                state.cancelled = true
                return state.continuation != nil
            }
            if started { finish(.failed(.network("the download was cancelled"))) }
        }
    }

    /// Ends the download once: answers `run()`, cancels the request, drops the session.
    private func finish(_ outcome: FileStreamOutcome) {
        let (continuation, task, session) = state.withLock { state in
            defer {
                state.continuation = nil
                state.task = nil
                state.session = nil
            }
            return (state.continuation, state.task, state.session)
        }
        continuation?.resume(returning: outcome)
        task?.cancel()
        session?.invalidateAndCancel()
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard let http = response as? HTTPURLResponse else {
            completionHandler(.cancel)
            return finish(.failed(.network("not an HTTP response")))
        }
        do {
            let range = try URLSessionTransport.fileStreamStart(http, offset: offset)
            state.withLock { state in
                if let range {
                    state.range = range
                    state.position = range.start
                } else {
                    state.refusal = (http.statusCode, Data(), http.value(forHTTPHeaderField: "Retry-After"))
                }
            }
            completionHandler(.allow)
        } catch {
            completionHandler(.cancel)
            finish(.failed(error))
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard !data.isEmpty else { return }
        let target: (position: Int64, total: Int64?)? = state.withLock { state in
            if state.refusal != nil {
                if state.refusal!.body.count < 64 * 1024 { state.refusal!.body.append(data) }
                return nil
            }
            guard state.failure == nil, let range = state.range else { return nil }
            return (state.position, range.total)
        }
        guard let target else { return }
        do {
            try sink(FileChunk(start: target.position, data: data, totalSize: target.total))
            state.withLock { $0.position += Int64(data.count) }
        } catch {
            finish(.failed(.network("the download was stopped: \(error)")))
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (refusal, range, position) = state.withLock { ($0.refusal, $0.range, $0.position) }
        if let refusal {
            finish(.refused(status: refusal.status, body: refusal.body, retryAfter: refusal.retryAfter))
        } else if let error {
            finish(.failed(.network(String(describing: error))))
        } else if let range {
            finish(.finished(FileStreamAnswer(start: range.start, totalSize: range.total, receivedBytes: position - range.start)))
        } else {
            finish(.failed(.network("the download ended without an answer")))
        }
    }
}
