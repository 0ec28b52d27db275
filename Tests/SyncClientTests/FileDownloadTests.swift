import Foundation
import OutpostTestSupport
import Testing

@testable import LearningClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A range body is written to a file of its own and never left behind: Linux's
/// `URLSession.download(for:)` kept its temporary file whenever a transfer failed.
@Suite("File download: a range's body in a file, none left behind")
struct FileDownloadTests {
    @Test("a request that fails leaves no file; leftovers of a killed process are cleared once per process and folder")
    func nothingLeftBehind() async throws {
        let folder = try TemporaryDirectory(prefix: "file-download")
        let bodies = folder.url.appendingPathComponent("bodies")
        // Nothing listens on port 1 of the loopback: the connection is refused.
        let request = URLRequest(url: URL(string: "http://127.0.0.1:1/assets/a")!, timeoutInterval: 5)
        await #expect(throws: (any Error).self) {
            _ = try await FileDownload.body(of: request, configuration: .ephemeral, in: bodies)
        }
        #expect((try? FileManager.default.contentsOfDirectory(atPath: bodies.path)) ?? [] == [])

        // What a killed process left, and a file of another kind, in a folder seen for the first time.
        let leftovers = folder.url.appendingPathComponent("leftovers")
        try FileManager.default.createDirectory(at: leftovers, withIntermediateDirectories: true)
        try Data("half a range".utf8).write(to: leftovers.appendingPathComponent(FileDownload.filePrefix + "killed"))
        try Data("kept".utf8).write(to: leftovers.appendingPathComponent("asset-1"))
        FileDownload.removeLeftovers(in: leftovers)
        #expect(try FileManager.default.contentsOfDirectory(atPath: leftovers.path) == ["asset-1"])
        // Later calls in this process leave the folder to the downloads it now has.
        try Data("in flight".utf8).write(to: leftovers.appendingPathComponent(FileDownload.filePrefix + "mine"))
        FileDownload.removeLeftovers(in: leftovers)
        #expect(try FileManager.default.contentsOfDirectory(atPath: leftovers.path).sorted() == ["asset-1", FileDownload.filePrefix + "mine"])
    }
}
