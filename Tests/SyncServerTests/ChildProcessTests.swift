import Foundation
import OutpostTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The tests' own child processes (`ChildProcess`, started with `posix_spawn`): what they get
/// and what they do not inherit.
@Suite("ChildProcess", .blockingWork)
struct ChildProcessTests {
    static let shell = URL(fileURLWithPath: "/bin/sh")

    @Test("a child runs in its directory with the environment given, and its exit code comes back")
    func directoryEnvironmentAndStatus() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let result = try ChildProcess.run(
            Self.shell, ["-c", "pwd; echo \"$CHILD_TEST\"; echo oops >&2; exit 3"], in: folder, environment: ["CHILD_TEST": "given"])
        #expect(result.status == 3)
        #expect(result.stdout == folder.resolvingSymlinksInPath().path + "\ngiven\n")
        #expect(result.stderr == "oops\n")
    }

    @Test("a signal ends it with that signal as its status, and SIGTERM is not blocked or ignored in it")
    func signals() throws {
        let child = try ChildProcess(Self.shell, ["-c", "echo ready; exec sleep 30"])
        #expect(try child.poll(timeout: 30) { child.stdout.contains("ready") })
        child.signal(SIGTERM)
        #expect(try child.wait(timeout: 30).status == SIGTERM)
    }

    @Test("a descriptor this process opened without close-on-exec does not reach the child")
    func descriptorsAreNotInherited() throws {
        let descriptor = open("/dev/null", O_RDONLY)
        try #require(descriptor > 2)
        defer { close(descriptor) }
        let result = try ChildProcess.run(Self.shell, ["-c", "test -e /proc/self/fd/\(descriptor) && echo inherited || echo closed"])
        #expect(result.stdout == "closed\n")
    }
}

/// The harness trait that keeps blocking tests off the cooperative pool.
@Suite("Blocking work off the cooperative pool")
struct BlockingWorkTraitTests {
    @Suite(.blockingWork)
    struct Marked {
        @Test("a synchronous test of a suite marked .blockingWork runs on the blocking-work threads")
        func synchronousTestRunsOffThePool() {
            #expect(BlockingWorkExecutor.isCurrent)
        }

        @Test("so does an asynchronous one, after it suspends")
        func asynchronousTestRunsOffThePool() async throws {
            try await Task.sleep(for: .milliseconds(1))
            #expect(BlockingWorkExecutor.isCurrent)
        }
    }

    @Test("a test of an unmarked suite runs on the cooperative pool")
    func unmarkedTestRunsOnThePool() {
        #expect(!BlockingWorkExecutor.isCurrent)
    }
}
