import Foundation

/// Runs an `async` closure to completion on the calling thread.
///
/// GRDB hands out a SQLite connection only inside a synchronous closure, on the connection's own
/// dispatch queue, and checks every use happens there. The storage protocol's transactions are
/// `async` (PostgreSQL's steps suspend on the network), so ``SQLiteStorage`` bridges the two with
/// this executor: the closure runs as a task whose executor preference is this object, whose jobs
/// run here, on the thread that owns the connection, one after the other. SQLite steps complete
/// without suspending, so a transaction costs no thread hop at all; if the closure does suspend
/// (a test holding a transaction open), this thread waits for its next job, as a synchronous GRDB
/// transaction would hold the connection anyway. Never used on an event loop or a thread of
/// Swift's cooperative pool: only on GRDB's own queues.
final class ConnectionThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Runs `operation` on this thread and returns its result, or throws its error.
    static func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
        let executor = ConnectionThreadExecutor()
        let outcome = Outcome<T>()
        // Only this thread ever runs the task's jobs; `Task` needs the closure to be Sendable.
        Task(executorPreference: executor) {
            outcome.result = await Result(catching: operation)
            executor.finish()
        }
        executor.drain()
        return try outcome.result!.get()
    }

    private func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    /// Runs jobs as they come until the task has finished.
    private func drain() {
        let unowned = asUnownedTaskExecutor()
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: unowned)
        }
    }

    /// Written by the task's last job, read after `drain` returns (the condition orders the two).
    private final class Outcome<T: Sendable>: @unchecked Sendable {
        var result: Result<T, any Error>?
    }
}

extension Result where Failure == any Error {
    /// The result of an async throwing operation.
    init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
