import Foundation
import OutpostTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The tests' own child processes (`ChildProcess`, started with `posix_spawn`): what they get
/// and what they do not inherit.
@Suite("ChildProcess")
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
