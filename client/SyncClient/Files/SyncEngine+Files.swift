public import ContractRuntime
import Crypto
public import Foundation
import SyncProtocol

/// Files: uploaded before the writes that name them are pushed, downloaded when the app asks.
extension SyncEngine {
    // MARK: Downloads

    /// The file of `reference` on this device: at once when the store holds it; else downloaded
    /// from the server (`GET /sync/v1/files/{sha256}`, in ranges of
    /// ``SyncEngineConfiguration/fileChunkBytes``, resumed from the bytes a cut-short download
    /// left), checked against its SHA-256 and size, moved into the store's files folder and
    /// cached. Concurrent calls for the same file share one download.
    ///
    /// ```swift
    /// let url = try await engine.file(for: receipt.photo)
    /// imageView.image = UIImage(contentsOfFile: url.path)
    /// ```
    ///
    /// Cached files are kept within ``StorageLimits/fileCacheBytes``, the least recently used
    /// evicted first (a file this returns counts as used); files waiting to upload and files
    /// named by rows with unsynced writes are never evicted. A download is not counted in the
    /// automatic data budget: the app asked for it.
    ///
    /// - Throws: ``FileDownloadError/transport(_:)`` (`404`: the server does not hold it, or this
    ///   user may not read it), ``FileDownloadError/hashMismatch(expected:received:)`` (the bytes
    ///   were deleted; the next call starts again), ``FileDownloadError/store(_:)`` (no room:
    ///   ``FileError/insufficientSpace(neededBytes:availableBytes:)``).
    public func file(for reference: FileReference) async throws(FileDownloadError) -> URL {
        do {
            if let url = try store.localFile(for: reference) { return url }
        } catch {
            throw .store(error)
        }
        let sha = reference.sha256
        let task: Task<Result<URL, FileDownloadError>, Never>
        if let running = fileDownloads[sha] {
            task = running
        } else {
            let (store, transport, chunk, limit) = (store, transport, configuration.fileChunkBytes, configuration.fileRangeLimitBytes)
            task = Task { await FileTransfers.download(reference, store: store, transport: transport, chunkBytes: chunk, rangeLimit: limit) }
            fileDownloads[sha] = task
        }
        let result = await task.value
        fileDownloads[sha] = nil
        return try result.get()
    }

    // MARK: Uploads

    /// Uploads every file waiting to upload, oldest first, with their bytes in the status
    /// (``SyncProgress/fileBytesSent`` of ``SyncProgress/fileBytesTotal``). A file the server
    /// refuses (``FileTransfers/isRefusal(_:)``: `quota_exceeded`, `hash_mismatch`,
    /// `content_type_mismatch`) is marked with the reason and not sent again by itself: the push
    /// fails the writes naming it (``holdForFiles(_:traffic:)``), and ``OfflineStore/retryFailed(seq:)``
    /// tries it once more. A network failure ends the sync, to resume from the acknowledged
    /// offset. Returns `false` when an automatic sync's data budget ran out (nothing more is
    /// sent in this sync). In a background window each request of an upload (declaration,
    /// offset, chunk) starts only when it fits before the deadline: one cut off keeps the offset
    /// acknowledged so far and the sync stops (``EngineFailure/deadline``).
    func uploadWaitingFiles(traffic: TrafficCounter?, budgetLeft: Int?) async throws(EngineFailure) -> Bool {
        // Files no queued write names any more are not sent; their uploads under way are given up.
        let abandoned: [String]
        do { abandoned = try store.releaseUnneededFiles() } catch { throw .store(error) }
        for upload in abandoned {
            // At worst the server's housekeeping drops it after a day.
            try? await transport.abandonFileUpload(uploadID: upload)
        }
        let waiting: [StoredFile]
        do { waiting = try store.filesWaitingToUpload().filter { $0.lastError == nil } } catch { throw .store(error) }
        guard !waiting.isEmpty else { return true }
        snapshot.progress.fileBytesTotal = waiting.reduce(0) { $0 + max(0, $1.reference.byteCount - $1.acknowledgedOffset) }
        snapshot.progress.fileBytesSent = 0
        publish()
        for file in waiting {
            let outcome: FileTransfers.UploadOutcome
            do {
                outcome = try await FileTransfers.upload(
                    file, store: store, transport: transport, chunkBytes: configuration.fileChunkBytes,
                    mayStillSend: { bytes in budgetLeft.map { (traffic?.bytes ?? 0) + bytes <= $0 } ?? true },
                    traffic: traffic, window: window
                ) { [weak self] sent in await self?.fileBytesSent(sent) }
            } catch .transport(let error) where FileTransfers.isRefusal(error) {
                // Refused: the push fails the writes naming it; the other files go on.
                do { try store.recordUploadFailure(sha256: file.reference.sha256, error: error.detail) } catch { throw .store(error) }
                continue
            }
            if outcome == .stopped { return false }
        }
        return true
    }

    private func fileBytesSent(_ bytes: Int64) {
        snapshot.progress.fileBytesSent += bytes
        publish()
    }

    /// The batch's writes that name a file still waiting to upload: its files are uploaded now
    /// if they can be. A write naming a file the server refused fails with the refusal (the
    /// app retries or discards it: ``OfflineStore/retryFailed(seq:)``), so it never holds up
    /// the writes after it, and the batch is taken again (`true`). Any other failure leaves the
    /// batch waiting (its entries deferred) and fails the sync with the reason.
    func holdForFiles(_ request: PushRequest, traffic: TrafficCounter?) async throws(EngineFailure) -> Bool {
        var waiting: [StoredFile]
        do { waiting = try store.filesWaitingToUpload(namedBy: request.mutations) } catch { throw .store(error) }
        guard !waiting.isEmpty else { return false }
        var failure: TransportError?
        for file in waiting where file.lastError == nil {
            do {
                _ = try await FileTransfers.upload(
                    file, store: store, transport: transport, chunkBytes: configuration.fileChunkBytes, mayStillSend: { _ in true },
                    traffic: traffic, window: window
                ) { [weak self] sent in await self?.fileBytesSent(sent) }
            } catch .transport(let error) {
                if FileTransfers.isRefusal(error) {
                    do { try store.recordUploadFailure(sha256: file.reference.sha256, error: error.detail) } catch { throw .store(error) }
                } else {
                    failure = failure ?? error
                }
            } catch {
                throw error
            }
        }
        do { waiting = try store.filesWaitingToUpload(namedBy: request.mutations) } catch { throw .store(error) }
        guard !waiting.isEmpty else { return false }
        let refusals = Dictionary(waiting.compactMap { file in file.lastError.map { (file.reference.sha256, $0) } }, uniquingKeysWith: { a, _ in a })
        if !refusals.isEmpty {
            do { try store.failWrites(of: request, namingRefusedFiles: refusals) } catch { throw .store(error) }
            refreshCounts()
            publish()
            return true
        }
        let error =
            failure
            ?? TransportError.http(
                status: 409,
                body: ErrorBody(ErrorDetail(code: .fileMissing, message: "a file this write names is not uploaded yet")), retryAfter: nil)
        do {
            try store.deferMutations(request.mutations.map(\.clientMutationId), until: store.now().date, error: error.detail)
        } catch {
            throw .store(error)
        }
        throw .transport(error)
    }
}

/// The file transfers' state machines, apart from the engine so that each step is testable.
enum FileTransfers {
    /// How an upload ended.
    enum UploadOutcome: Sendable {
        /// The server holds the file (uploaded now, or already there).
        case uploaded
        /// The data budget stopped it; the acknowledged offset is kept.
        case stopped
    }

    /// Whether an upload failure is one to try again later (the network, 5xx, 429, 408), as
    /// opposed to a refusal of the file (`quota_exceeded`, `hash_mismatch`, a transport without
    /// the file routes).
    static func isWorthRetrying(_ error: TransportError) -> Bool {
        if case .http(_, let body?, _) = error, body.error.code == ErrorCode("files_unsupported") { return false }
        return RetryPolicy.isRetryable(error)
    }

    /// Whether the server refused the file itself, so that sending it again as it is cannot
    /// succeed by waiting: too large or over the quota (413), not the type it claims (415, 422
    /// `content_type_mismatch`), bytes that do not hash to it (422 `hash_mismatch`), a malformed
    /// declaration (400), or a transport without the file routes. A refused identity or a limit
    /// on uploads under way is not a refusal of the file: the sync fails and is tried again.
    static func isRefusal(_ error: TransportError) -> Bool {
        guard case .http(let status, let body, _) = error else { return false }
        if body?.error.code == ErrorCode("files_unsupported") { return true }
        return status == 400 || status == 413 || status == 415 || status == 422
    }

    /// Uploads one waiting file: resumes its upload from where the server stands (`HEAD` when
    /// the store knows an upload, else `POST`, which answers an unfinished upload of this user
    /// again, or `stored`), then sends `PATCH`es of `chunkBytes` from that offset, recording
    /// each acknowledged offset in the store, so a lost connection, a restart or a kill resumes
    /// there. An upload the server lost (`404`) is started again; a `409 offset_mismatch` moves
    /// to the server's offset. `progress` gets the bytes each answer acknowledged. In a
    /// background `window`, each request starts only when it fits before its deadline, else
    /// ``EngineFailure/deadline`` is thrown with the offset acknowledged so far recorded.
    static func upload(
        _ file: StoredFile, store: OfflineStore, transport: any SyncTransport, chunkBytes: Int,
        mayStillSend: @Sendable (Int) -> Bool, traffic: TrafficCounter?, window: WindowBudget? = nil, progress: (Int64) async -> Void
    ) async throws(EngineFailure) -> UploadOutcome {
        let sha = file.reference.sha256
        let size = file.reference.byteCount
        var uploadID = file.uploadID
        var offset = file.acknowledgedOffset
        var restarts = 0
        var mismatches = 0
        func record(_ id: String?, _ at: Int64) throws(EngineFailure) {
            do { try store.recordUploadProgress(sha256: sha, uploadID: id, offset: at) } catch { throw .store(error) }
        }
        func uploaded() throws(EngineFailure) -> UploadOutcome {
            do { try store.recordUploaded(sha256: sha) } catch { throw .store(error) }
            return .uploaded
        }
        while true {
            let id: String
            if let known = uploadID {
                let asked = try await WindowBudget.perform(in: window) { () async throws(TransportError) in
                    try await transport.fileUploadOffset(uploadID: known)
                }
                do {
                    offset = try asked.get()
                    id = known
                } catch .http(let status, _, _) where status == 404 || status == 410 {
                    // Gone (expired, finished or abandoned): ask again; a stored file answers `stored`.
                    uploadID = nil
                    try record(nil, 0)
                    continue
                } catch {
                    throw .transport(error)
                }
            } else {
                let answer: FileUploadAnswer
                let declaration = FileUploadRequest(file.reference)
                let asked = try await WindowBudget.perform(in: window) { () async throws(TransportError) in
                    try await transport.startFileUpload(declaration)
                }
                do { answer = try asked.get() } catch { throw .transport(error) }
                if answer.state == .stored { return try uploaded() }
                guard let given = answer.uploadID else { throw .transport(.decoding("an upload answer without upload_id")) }
                (id, offset) = (given, answer.offset)
            }
            uploadID = id
            try record(id, offset)
            // At least one PATCH: the one that carries (or, at the end, confirms) the last byte
            // has the server check the hash and store the file.
            sending: while true {
                let count = Int(min(Int64(chunkBytes), max(0, size - offset)))
                guard mayStillSend(count) else { return .stopped }
                let bytes: Data
                do { bytes = count > 0 ? try store.readFileBytes(sha256: sha, offset: offset, count: count) : Data() } catch { throw .store(error) }
                // In a window, the chunk goes only when it fits: cut off, the next window resumes
                // from the offset recorded after the last chunk acknowledged.
                let sent = try await WindowBudget.perform(in: window) { [offset] () async throws(TransportError) in
                    try await transport.sendFileBytes(bytes, uploadID: id, offset: offset)
                }
                traffic?.add(bytes.count)
                let answer: FileChunkAnswer
                do {
                    answer = try sent.get()
                } catch .http(let status, _, _) where (status == 404 || status == 410) && restarts < 3 {
                    restarts += 1
                    uploadID = nil
                    try record(nil, 0)
                    break sending
                } catch {
                    throw .transport(error)
                }
                switch answer {
                case .accepted(let acknowledged):
                    if acknowledged > offset { await progress(acknowledged - offset) }
                    offset = acknowledged
                    try record(id, offset)
                    if offset >= size { return try uploaded() }
                case .offsetMismatch(let serverOffset):
                    mismatches += 1
                    guard mismatches <= 5 else {
                        throw .transport(
                            .http(
                                status: 409,
                                body: ErrorBody(ErrorDetail(code: .offsetMismatch, message: "the upload's offset keeps moving")),
                                retryAfter: nil))
                    }
                    offset = serverOffset
                    try record(id, offset)
                }
            }
        }
    }

    /// One range of a file's bytes from the server, received into `destination`, as a result to
    /// hand between tasks.
    static func bytes(
        of sha256: String, range: ClosedRange<Int64>, into destination: URL, from transport: any SyncTransport
    ) async -> Result<ReceivedFileBytes, TransportError> {
        do {
            return .success(try await transport.fileBytes(sha256: sha256, range: range, into: destination))
        } catch {
            return .failure(error)
        }
    }

    /// Downloads the file of `reference` into the store: from the bytes a partial download left,
    /// a range at a time, then checked and moved into place (``OfflineStore/adoptDownloadedFile(_:verifiedSHA256:)``).
    ///
    /// The first range is `chunkBytes` and each next one twice the last, up to `rangeLimit`: a
    /// request costs as much again as a few MiB on the way, so a large file goes in a few large
    /// requests, while a download on a poor connection, which starts again from `chunkBytes`
    /// after each cut, keeps what it had received in every finished range. Each range arrives
    /// in a file of its own (``SyncTransport/fileBytes(sha256:range:into:)``), which becomes
    /// the partial file by a rename (the first) or is appended to it by the kernel: no byte
    /// passes through memory on the way. The next range is asked for before one is placed, and
    /// each range is hashed from its own file on another thread while it is placed and the next
    /// one travels (a resumed download hashes what it kept first), so no second pass reads the
    /// file.
    static func download(
        _ reference: FileReference, store: OfflineStore, transport: any SyncTransport, chunkBytes: Int, rangeLimit: Int
    ) async -> Result<URL, FileDownloadError> {
        let sha = reference.sha256
        let size = reference.byteCount
        store.fileStaging.beginDownload(sha)
        defer { store.fileStaging.endDownload(sha) }
        var offset = min(store.partialFileSize(sha256: sha), size)
        var hasher: SHA256
        do {
            try store.ensureFileSpace(for: size - offset)
            (hasher, offset) = try store.partialFileHasher(sha256: sha, upTo: offset)
        } catch {
            return .failure(.store(error))
        }
        // The hash of the bytes so far: each range is hashed from its own file on another
        // thread, after the range before it, while it is placed and the next one travels.
        var hashing: Task<Result<SHA256, OfflineStoreError>, Never>?
        var step = Int64(max(1, chunkBytes))
        let limit = max(step, Int64(rangeLimit))
        func fetch(_ from: Int64) throws(OfflineStoreError) -> (URL, Task<Result<ReceivedFileBytes, TransportError>, Never>) {
            let upper = min(size, from + step) - 1
            step = min(limit, step * 2)
            let destination = try store.receivedRangeURL(sha256: sha, start: from)
            return (destination, Task { await bytes(of: sha, range: from...upper, into: destination, from: transport) })
        }
        var next: (URL, Task<Result<ReceivedFileBytes, TransportError>, Never>)?
        do {
            if offset < size { next = try fetch(offset) }
        } catch {
            return .failure(.store(error))
        }
        defer {
            if let (destination, pending) = next {
                pending.cancel()
                try? FileManager.default.removeItem(at: destination)
            }
        }
        var emptyAnswers = 0
        while let (destination, pending) = next, offset < size {
            next = nil
            let received: ReceivedFileBytes
            switch await pending.value {
            case .success(let answer): received = answer
            case .failure(let error):
                try? FileManager.default.removeItem(at: destination)
                return .failure(.transport(error))
            }
            // A server that ignored the range sent the file from its start.
            guard received.start == offset || received.start == 0 else {
                try? FileManager.default.removeItem(at: destination)
                return .failure(.transport(.decoding("the server answered bytes from \(received.start), not \(offset)")))
            }
            let start = received.start
            let end = start + received.byteCount
            // The next range goes out before this one is placed; an unexpected answer asks again from where it ends.
            // A range that cannot be asked for (no staging folder) ends the download with the
            // store's error: the partial file stays, to be resumed.
            do {
                if end < size, received.byteCount > 0, received.totalSize.map({ $0 == size }) ?? true { next = try fetch(end) }
            } catch {
                try? FileManager.default.removeItem(at: destination)
                return .failure(.store(error))
            }
            let file: ReadOnlyFile
            do {
                file = try ReadOnlyFile(destination)
            } catch {
                try? FileManager.default.removeItem(at: destination)
                return .failure(.store(error))
            }
            let (previous, resumed, count) = (hashing, hasher, received.byteCount)
            hashing = Task {
                var hasher = resumed
                if let previous {
                    switch await previous.value {
                    case .success(let hashed): hasher = hashed
                    case .failure(let error): return .failure(error)
                    }
                }
                if start == 0 { hasher = SHA256() }
                do throws(OfflineStoreError) {
                    _ = try file.hash(from: 0, count: count, into: &hasher)
                    return .success(hasher)
                } catch {
                    return .failure(error)
                }
            }
            do {
                try store.placeReceivedRange(destination, sha256: sha, at: start)
            } catch {
                return .failure(.store(error))
            }
            offset = end
            if received.byteCount == 0 {
                emptyAnswers += 1
                if emptyAnswers > 2 { break }
                do { next = try fetch(offset) } catch { return .failure(.store(error)) }
            }
            if let total = received.totalSize, total != size { break }
        }
        if let previous = hashing {
            switch await previous.value {
            case .success(let hashed): hasher = hashed
            case .failure(let error): return .failure(.store(error))
            }
        }
        let digest = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        do {
            return try store.adoptDownloadedFile(reference, verifiedSHA256: offset == size ? digest : nil)
        } catch {
            return .failure(.store(error))
        }
    }
}
