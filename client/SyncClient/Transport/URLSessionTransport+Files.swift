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
        let (data, http) = try await fileExchange(request, receivingFile: true)
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
    /// answered whatever its status, with its headers; a file's bytes (`receivingFile`) come
    /// through ``receiveFile(_:)``.
    func fileExchange(_ request: URLRequest, receivingFile: Bool = false) async throws(TransportError) -> (Data, HTTPURLResponse) {
        var request = request
        if let appVersion { request.setValue(appVersion, forHTTPHeaderField: ProtocolHeaders.appVersion) }
        var refresh = false
        while true {
            var attempt = request
            try await authorize(&attempt, refresh: refresh)
            let (data, http) = try await receivingFile ? receiveFile(attempt) : perform(attempt)
            if http.statusCode == 401, !refresh {
                refresh = true
                continue
            }
            return (data, http)
        }
    }

    /// A range of a file's bytes through a download task rather than a data task: the session
    /// writes the body to a temporary file as it arrives and the answer is read from it in one
    /// piece. URLSession's data tasks on Linux gather a body in growing buffers, which held
    /// several copies of every range and took as long again as the bytes' travel; a download
    /// task costs what a raw `GET` costs. Through ``exchange`` when there is one, as ``perform(_:)``.
    func receiveFile(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse) {
        if let exchange { return try await exchange.send(request) }
        let running = Locked<URLSessionDownloadTask?>(nil)
        let session = session
        let answer: Result<(Data, HTTPURLResponse), TransportError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let task = session.downloadTask(with: request) { location, response, error in
                    // The temporary file is deleted once this returns: read it here.
                    if let error {
                        continuation.resume(returning: .failure(.network(String(describing: error))))
                    } else if let http = response as? HTTPURLResponse, let location {
                        do {
                            continuation.resume(returning: .success((try Data(contentsOf: location), http)))
                        } catch {
                            continuation.resume(returning: .failure(.network("reading the received bytes: \(error)")))
                        }
                    } else {
                        continuation.resume(returning: .failure(.network("not an HTTP response")))
                    }
                }
                running.withLock { $0 = task }
                task.resume()
                if Task.isCancelled { task.cancel() }
            }
        } onCancel: {
            running.withLock { $0?.cancel() }
        }
        return try answer.get()
    }
}
