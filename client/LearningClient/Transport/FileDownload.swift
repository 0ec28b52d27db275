import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Downloads one request's body into a file of its own, as it arrives: never into memory, and,
/// unlike `URLSession.download(for:)` in Linux's FoundationNetworking, leaving no file behind
/// when the request fails or is cancelled (that one creates its temporary file up front and
/// keeps it when the transfer does not complete: a device lost one per interrupted range).
///
/// Each download runs on a session of its own (the transport session's configuration, this
/// object its delegate), invalidated when the download ends.
final class FileDownload: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // `@unchecked`: the mutable state is only touched under `lock`; URLSession calls the
    // delegate on its own queue.
    private let lock = NSLock()
    private let file: URL
    private var handle: FileHandle?
    private var response: URLResponse?
    private var writeError: (any Error)?
    private var continuation: CheckedContinuation<(URL, URLResponse), any Error>?

    private init(file: URL) {
        self.file = file
    }

    /// The folders this process cleared of leftovers (``removeLeftovers(in:)``).
    private static let cleared = ClearedFolders()

    private final class ClearedFolders: @unchecked Sendable {
        // `@unchecked`: `paths` is only touched under `lock`.
        private let lock = NSLock()
        private var paths: Set<String> = []

        /// Runs `clear` for `path` the first time it is asked for, under the lock: a download
        /// asking meanwhile waits, so no download of this process has started when it runs.
        func once(_ path: String, _ clear: () -> Void) {
            lock.withLock {
                guard paths.insert(path).inserted else { return }
                clear()
            }
        }
    }

    static let filePrefix = "outpost-range-"

    /// The body of `request` in a new file in `directory` (the temporary folder when `nil`; the
    /// caller removes the file), and the response. On any failure or cancellation the file is gone.
    static func body(of request: URLRequest, configuration: URLSessionConfiguration, in directory: URL?) async throws -> (URL, URLResponse) {
        let file = (directory ?? FileManager.default.temporaryDirectory).appendingPathComponent(filePrefix + UUID().uuidString)
        let download = FileDownload(file: file)
        let session = URLSession(configuration: configuration, delegate: download, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: request)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // Cancelled before it started: the task would never call back.
                if Task.isCancelled { return continuation.resume(throwing: CancellationError()) }
                download.lock.withLock { download.continuation = continuation }
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// Removes the body files a killed process left in `directory`, once per process and
    /// folder, before this process's first download there (call it before each download).
    static func removeLeftovers(in directory: URL) {
        cleared.once(directory.standardizedFileURL.path) {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
            for name in names where name.hasPrefix(filePrefix) {
                try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
            }
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let opened: Bool = lock.withLock {
            self.response = response
            do {
                try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                _ = FileManager.default.createFile(atPath: file.path, contents: nil)
                handle = try FileHandle(forWritingTo: file)
                return true
            } catch {
                writeError = error
                return false
            }
        }
        completionHandler(opened ? .allow : .cancel)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let failed: Bool = lock.withLock {
            guard writeError == nil, let handle else { return true }
            do {
                try handle.write(contentsOf: data)
                return false
            } catch {
                writeError = error
                return true
            }
        }
        if failed { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (continuation, outcome): (CheckedContinuation<(URL, URLResponse), any Error>?, Result<(URL, URLResponse), any Error>) =
            lock.withLock {
                try? handle?.close()
                handle = nil
                let waiting = self.continuation
                self.continuation = nil
                if let failure = writeError ?? error {
                    return (waiting, .failure(failure))
                }
                guard let response else { return (waiting, .failure(URLError(.badServerResponse))) }
                // An empty body never called back with data: its file is still made.
                if !FileManager.default.fileExists(atPath: file.path) { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
                return (waiting, .success((file, response)))
            }
        if case .failure = outcome { try? FileManager.default.removeItem(at: file) }
        continuation?.resume(with: outcome)
    }
}
