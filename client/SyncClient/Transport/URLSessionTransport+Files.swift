public import Foundation
public import SyncProtocol

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The file routes (SyncProtocol's `FileRoutes`), through the same session or exchange, token
/// and `X-Outpost-App` as the sync routes. Each request carries one chunk at most, so memory
/// stays flat whatever the file's size.
extension URLSessionTransport {
    /// `POST /sync/v1/files`: declares the file and answers where its upload stands.
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

    /// `HEAD /sync/v1/files/uploads/{id}`: the bytes the upload holds.
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

    /// `PATCH /sync/v1/files/uploads/{id}`: sends `bytes` from `offset`.
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

    /// `GET /sync/v1/files/{sha256}` with a `Range`: those bytes of the file, in memory.
    public func fileBytes(sha256: String, range: ClosedRange<Int64>) async throws(TransportError) -> FileChunk {
        let request = fileRangeRequest(sha256: sha256, range: range)
        let (data, http) = try await fileExchange(request) { (attempt) throws(TransportError) in try await self.receiveFile(attempt) }
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

    /// `GET /sync/v1/files/{sha256}` with a `Range`: those bytes of the file, downloaded into `destination`.
    public func fileBytes(sha256: String, range: ClosedRange<Int64>, into destination: URL) async throws(TransportError) -> ReceivedFileBytes {
        // An exchange answers in memory: the protocol's default writes what it answers.
        guard exchange == nil else { return try ReceivedFileBytes.writing(try await fileBytes(sha256: sha256, range: range), to: destination) }
        let request = fileRangeRequest(sha256: sha256, range: range)
        let (data, http) = try await fileExchange(request) { (attempt) throws(TransportError) in
            try await self.receiveFile(attempt, into: destination)
        }
        switch http.statusCode {
        case 200..<300:
            let written = Self.fileSize(destination)
            guard http.statusCode == 206 else { return ReceivedFileBytes(start: 0, byteCount: written, totalSize: written) }
            guard let contentRange = http.value(forHTTPHeaderField: "Content-Range"),
                let (start, total) = Self.parseFileContentRange(contentRange)
            else {
                try? FileManager.default.removeItem(at: destination)
                throw .decoding("a 206 without a Content-Range of bytes")
            }
            return ReceivedFileBytes(start: start, byteCount: written, totalSize: total)
        default:
            throw Self.error(status: http.statusCode, data: data, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        }
    }

    /// `DELETE /sync/v1/files/uploads/{id}`: gives up the upload.
    public func abandonFileUpload(uploadID: String) async throws(TransportError) {
        var request = makeRequest(path: String(FileRoutes.upload(uploadID).dropFirst()), query: [])
        request.httpMethod = "DELETE"
        let (data, http) = try await fileExchange(request)
        // Gone already (finished, expired, dropped): nothing left to free.
        guard (200..<300).contains(http.statusCode) || http.statusCode == 404 || http.statusCode == 410 else {
            throw Self.error(status: http.statusCode, data: data, retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        }
    }

    /// `GET /sync/v1/files/{sha256}` of `range`.
    private func fileRangeRequest(sha256: String, range: ClosedRange<Int64>) -> URLRequest {
        var request = makeRequest(path: String(FileRoutes.file(sha256).dropFirst()), query: [])
        request.httpMethod = "GET"
        request.setValue("*/*", forHTTPHeaderField: "Accept")
        // A range of the file's own bytes: never re-encoded on the way.
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        request.setValue("bytes=\(range.lowerBound)-\(range.upperBound)", forHTTPHeaderField: "Range")
        return request
    }

    private static func fileSize(_ url: URL) -> Int64 {
        (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value ?? 0
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
    /// answered whatever its status, with its headers, through `send` (``perform(_:)`` unless
    /// a file's bytes come through ``receiveFile(_:)``).
    func fileExchange(
        _ request: URLRequest,
        through send: ((URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse))? = nil
    ) async throws(TransportError) -> (Data, HTTPURLResponse) {
        var request = request
        if let appVersion { request.setValue(appVersion, forHTTPHeaderField: ProtocolHeaders.appVersion) }
        var refresh = false
        while true {
            var attempt = request
            try await authorize(&attempt, refresh: refresh)
            let (data, http): (Data, HTTPURLResponse)
            if let send { (data, http) = try await send(attempt) } else { (data, http) = try await perform(attempt) }
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
        return try await download(request) { location, _ in try Data(contentsOf: location) }
    }

    /// ``receiveFile(_:)`` with a successful answer's bytes moved to `destination` (replacing a
    /// file there) rather than read: the answer's data is then empty. Another answer (an error's
    /// JSON) is read as ``receiveFile(_:)`` reads it, and nothing is left at `destination`.
    func receiveFile(_ request: URLRequest, into destination: URL) async throws(TransportError) -> (Data, HTTPURLResponse) {
        try? FileManager.default.removeItem(at: destination)
        return try await download(request) { location, http in
            guard (200..<300).contains(http.statusCode) else { return try Data(contentsOf: location) }
            try FileManager.default.moveItem(at: location, to: destination)
            return Data()
        }
    }

    /// A download task for `request`, its temporary file handed to `keep` (which must read or
    /// move it: it is deleted once `keep` returns).
    private func download(
        _ request: URLRequest, keeping keep: @escaping @Sendable (URL, HTTPURLResponse) throws -> Data
    ) async throws(TransportError) -> (Data, HTTPURLResponse) {
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
                            continuation.resume(returning: .success((try keep(location, http), http)))
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
