import Foundation

/// Runs async work from a benchmark's synchronous `run` and waits for it. The work runs on
/// the global concurrent executor; the calling thread (the main thread) only waits.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = BlockingResult<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do {
            box.result = .success(try await body())
        } catch {
            box.result = .failure(error)
        }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// The result of ``runBlocking(_:)``'s task: written once by the task before it signals, read
/// by the waiting thread after the signal.
private final class BlockingResult<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
