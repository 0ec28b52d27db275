import Foundation
import OutpostTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `sync-device`'s file commands as a user runs them: what is refused before anything is queued
/// and with which exit code, the progress on a pipe and `--quiet`, and a download killed part
/// way and resumed.
@Suite("sync-device files", .serialized, .blockingWork)
struct FileCommandTests {
    @Test("a file the field does not take is refused before anything is queued, each refusal with its own exit code")
    func refusals() throws {
        let stage = try Stage()
        let tablet = try stage.device("tablet", user: "op-kim", teams: [Stage.team])
        let folder = stage.folder
        let tooLarge = folder.appendingPathComponent("huge.jpg")
        var huge = Data(count: 25_000_001)
        huge.replaceSubrange(0..<4, with: [0xFF, 0xD8, 0xFF, 0xE0])
        try huge.write(to: tooLarge)
        let notAJPEG = folder.appendingPathComponent("page.jpg")
        try Data("<html>not a photo</html>".utf8).write(to: notAJPEG)
        let text = folder.appendingPathComponent("notes.txt")
        try Data("notes".utf8).write(to: text)
        let photo = try DevicePhotos.write(size: 4096, seed: 3, in: folder, name: "ok.jpg")

        let cases: [(String, Int32, String)] = [
            ("@\(tooLarge.path)", 7, "more than the field's limit of 25000000"),
            ("@\(notAJPEG.path)", 7, "not those of a image/jpeg file"),
            ("@\(text.path)", 7, "files of type text/plain are not accepted"),
            ("@\(folder.appendingPathComponent("missing.jpg").path)", 66, "cannot read the file"),
            ("@\(photo.url.path);type=application/pdf", 7, "files of type application/pdf are not accepted"),
        ]
        for (value, status, message) in cases {
            let result = try tablet.run(DevicePhotos.issueArguments(photo: photo.url).dropLast(2) + ["--field", "photo_file=\(value)"])
            #expect(result.status == status, "\(value): \(result)")
            #expect(result.stderr.contains(message), "\(value): \(result.stderr)")
        }
        // Nothing queued, nothing left in the files folder.
        #expect(try tablet.json(["outbox", "--all"])["entries"].array.isEmpty)
        let files = tablet.home.appendingPathComponent("outpost-files")
        let left =
            FileManager.default.enumerator(at: files, includingPropertiesForKeys: [.isRegularFileKey])?
            .compactMap { $0 as? URL }.filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true } ?? []
        #expect(left.isEmpty, "\(left)")

        // An event's file is given when it is recorded; a server-owned entity takes none.
        let onEvent = try tablet.run(["attach", "issue-logged", "x", "photo_file", photo.url.path])
        #expect(onEvent.status == 64 && onEvent.stderr.contains("--field photo_file=@PATH"), "\(onEvent)")
        let onAsset = try tablet.run(["attach", "asset", "x", "file", photo.url.path])
        #expect(onAsset.status == 64, "\(onAsset)")
        // `file`: no such event (6), not a file field (64).
        let id = try DevicePhotos.logIssue(on: tablet, photo: photo.url)
        #expect(try tablet.run(["file", "issue-logged", "01NOPE", "photo_file"]).status == 6)
        let notFile = try tablet.run(["file", "issue-logged", id, "description"])
        #expect(notFile.status == 64 && notFile.stderr.contains("its file fields: photo_file"), "\(notFile)")
        // The device holds its own photo: answered at once, no network needed.
        try tablet.ok(["offline", "on"])
        let own = try tablet.ok(["file", "issue-logged", id, "photo_file"])
        #expect(own.stdout.contains("sha256 \(photo.sha256)") && own.stdout.contains("on the device at "), "\(own)")
        // A teammate who has not pulled it yet: no such event on that device (6).
        let other = try stage.device("other", user: "op-lee", teams: [Stage.team])
        #expect(try other.run(["file", "issue-logged", id, "photo_file"]).status == 6)
    }

    @Test("progress on a pipe is a line now and then and one at the end, nothing with --quiet; a download killed part way resumes")
    func progressAndResumedDownload() throws {
        let stage = try Stage()
        let tablet = try stage.device("tablet", user: "op-kim", teams: [Stage.team])
        let reader = try stage.device("reader", user: "op-lee", teams: [Stage.team])
        let photo = try DevicePhotos.write(size: 12 << 20, seed: 5, in: stage.folder, name: "mirror.jpg")
        let id = try DevicePhotos.logIssue(on: tablet, photo: photo.url)
        let sync = try tablet.ok(["sync"])
        #expect(sync.stderr.contains("upload: 12.6 MB of 12.6 MB (100%)"), "\(sync.stderr)")
        try reader.ok(["sync", "--quiet"])

        // Killed once the partial download holds a random part of it (64 KiB ranges).
        let partial = reader.home.appendingPathComponent("outpost-files")
        let slow = ["OUTPOST_FILE_CHUNK_BYTES": String(64 << 10)]
        let out = stage.folder.appendingPathComponent("fetched.jpg")
        let first = try reader.start(["file", "issue-logged", id, "photo_file", "--out", out.path], environment: slow)
        let cut = try first.poll { Self.partialBytes(in: partial) >= 3 << 20 }
        first.signal(SIGKILL)
        _ = try first.wait()
        #expect(cut, "the download ended before the kill: \(first.stderr)")
        let kept = Self.partialBytes(in: partial)
        #expect(kept >= 3 << 20 && kept < 12 << 20, "partial download of \(kept) bytes")
        #expect(!FileManager.default.fileExists(atPath: out.path), "nothing written before the file is checked")

        // Run again: it resumes from the partial file, checks the hash, writes the copy.
        let second = try reader.start(["file", "issue-logged", id, "photo_file", "--out", out.path, "--quiet"], environment: slow).wait()
        #expect(second.status == 0, "\(second)")
        #expect(second.stderr.isEmpty, "--quiet: \(second.stderr)")
        #expect(second.stdout.contains("sha256 \(photo.sha256)"))
        #expect(try Data(contentsOf: out) == photo.bytes)
        #expect(Self.partialBytes(in: partial) == 0)
        // Cached now: the next read is the device's.
        let cached = try reader.ok(["file", "issue-logged", id, "photo_file", "--json"])
        #expect(cached.stdout.contains(#""downloaded" : false"#), "\(cached)")
    }

    @Test("attach puts a file in a row's file field with the row's write: the next sync uploads it before the row, and a teammate fetches it")
    func attachToATask() throws {
        let stage = try Stage()
        let tablet = try stage.device("tablet", user: "op-kim", teams: [Stage.team])
        let teammate = try stage.device("teammate", user: "op-lee", teams: [Stage.team])
        try tablet.ok([
            "create", "task", "--id", "task-slip", "--field", "team_id=\(Stage.team)", "--field", "title=Swap the battery of scooter 17",
            "--field", "task_kind=battery_swap",
        ])
        try tablet.ok(["sync", "--quiet"])
        // A signed delivery slip, scanned: a PDF, attached while offline.
        let slip = stage.folder.appendingPathComponent("slip.pdf")
        let bytes = Data("%PDF-1.7\n".utf8) + Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try bytes.write(to: slip)
        try tablet.ok(["offline", "on"])
        let attached = try tablet.ok(["attach", "task", "task-slip", "evidence", slip.path, "--name", "slip.pdf"])
        #expect(attached.stdout.contains("Task task-slip"), "\(attached)")
        let queued = try tablet.json(["outbox"])["entries"].array
        #expect(queued.count == 1, "the attach is one queued write")
        // Back online: the file goes up, then the task.
        try tablet.ok(["offline", "off", "--quiet"])
        #expect(try tablet.json(["outbox"])["entries"].array.isEmpty)
        try teammate.ok(["sync", "--quiet"])
        let out = stage.folder.appendingPathComponent("slip-on-teammate.pdf")
        let fetched = try teammate.ok(["file", "task", "task-slip", "evidence", "--out", out.path, "--quiet"])
        #expect(try Data(contentsOf: out) == bytes)
        #expect(fetched.stdout.contains("sha256 "), "\(fetched)")
        // A video or a photo may be attached too; a text file may not (exit 7), and nothing is queued.
        try Data("Left the battery at the depot.".utf8).write(to: stage.folder.appendingPathComponent("notes.txt"))
        let refused = try tablet.run(["attach", "task", "task-slip", "evidence", stage.folder.appendingPathComponent("notes.txt").path])
        #expect(refused.status == 7, "\(refused)")
        #expect(try tablet.json(["outbox"])["entries"].array.isEmpty)
    }

    /// Bytes of partial downloads in a device's files folder.
    static func partialBytes(in folder: URL) -> Int64 {
        let urls = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.fileSizeKey])?.compactMap { $0 as? URL } ?? []
        return urls.filter { $0.deletingLastPathComponent().lastPathComponent == "partial" }.reduce(0) { total, url in
            total + Int64((try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0)
        }
    }
}
