import Dispatch
package import Testing

/// Runs a suite's tests on threads of their own instead of Swift's cooperative pool.
///
/// The test process runs every suite at once, and the cooperative pool has one thread per core
/// (two here). A test that blocks (writes files, opens SQLite, or waits for a child process
/// with ``ChildProcess``, whose waits are synchronous, even in an `async` test) holds its pool
/// thread until it returns; two such tests at once left no thread for the loopback servers and
/// clients of the other suites, whose requests then timed out under a full run. Suites whose
/// tests block carry this trait, so their blocking waits on threads the operating system adds
/// and shares out, and the pool stays free for work that suspends.
package struct BlockingWorkTrait: SuiteTrait, TestTrait, TestScoping {
    package var isRecursive: Bool { true }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(BlockingWorkExecutor.shared) { try await function() }
    }
}

extension Trait where Self == BlockingWorkTrait {
    /// The suite's tests block (files, processes, SQLite): run them off the cooperative pool.
    package static var blockingWork: Self { BlockingWorkTrait() }
}

/// A task executor on a concurrent dispatch queue, whose threads are added as its jobs block
/// (a custom queue targets the overcommitting global queue, unlike the cooperative pool).
package final class BlockingWorkExecutor: TaskExecutor {
    package static let shared = BlockingWorkExecutor()

    private static let marker = DispatchSpecificKey<Bool>()
    private let queue: DispatchQueue

    private init() {
        queue = DispatchQueue(label: "outpost.tests.blocking-work", attributes: .concurrent)
        queue.setSpecific(key: Self.marker, value: true)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Whether the calling code runs on this executor's threads.
    package static var isCurrent: Bool { DispatchQueue.getSpecific(key: marker) ?? false }
}
