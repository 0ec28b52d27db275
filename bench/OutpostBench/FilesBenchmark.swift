import Foundation
import SyncServer

/// Files (docs/PERFORMANCE.md, `files`): the bytes of `file` fields through Outpost against the
/// same bytes through a bare HTTP server, the memory of both sides, the pull of rows that name
/// files, and PostgreSQL's two ways of holding bytes.
///
/// 1. **Throughput.** A real release `sync-server` (SQLite, its data folder's blob store) on
///    loopback; the device side a ``FilesDevice`` child process per transfer. Upload through the
///    engine: a fresh store imports the file for IssueLogged's `photo_file`, records an
///    IssueLogged naming it, and one `syncNow()` uploads the file (declare, `PATCH`es of 4 MiB,
///    the server's hash check and promotion) and pushes the event; the field takes 25 MB, so
///    past ``engineUploadMiB`` the upload is the same requests sent straight through the
///    transport (``FilesDevice/uploadThroughRoutes(_:store:transport:chunkBytes:)``), which is
///    also measured at every size. Download: a second fresh store of the same user,
///    `engine.file(for:)` (ranged `GET`s from 4 MiB doubling to 64 MiB, the hash check, the move into the store).
///    The baseline in the same run, pair by pair: the same bytes through ``FilesRawServer``
///    (Hummingbird, the server's HTTP stack, nothing of Outpost: one streamed `PUT` to a file,
///    fsynced; one `GET` of it) from the same `URLSession` stack in a child process. Bar:
///    Outpost's throughput ≥ 0.8× the raw transfer's, each way (the median of the pairs' ratios).
///    Beside it, the whole file from sync-server's route by the raw client: the server's share.
/// 2. **Memory.** The `sync-server` process's VmHWM after each size's transfers (a fresh server
///    per size) and each device process's; bar: at 1 GiB no more than 64 MiB over 10 MiB, each side.
/// 3. **Pulls naming files** (``FilesPullWorkload``): IssueLogged 2 rows with `photo_file` set
///    against the same rows with it null; bar: within 1.1×, on the server and on the device.
/// 4. **PostgreSQL** (``FilesPostgresWorkload``): chunks in `file_chunks` (``DatabaseBlobStore``)
///    against large objects; recorded, no bar.
///
/// `OUTPOST_BENCH_FILES_SIZES` (MiB, `10,1024` by default) picks the transfer sizes.
enum FilesBenchmark {
    static let barThroughput = 0.8
    static let barMemoryMiB = 64
    static let mebibyte = 1 << 20
    /// The largest size sent through the engine's own upload: IssueLogged's `photo_file` takes 25 MB.
    static let engineUploadMiB = 20

    static let benchmark = Benchmark(
        name: "files",
        summary: "file upload and download through sync-server and the engine against a raw HTTP PUT/GET of the same bytes (bar ≥ 0.8×), "
            + "peak memory of both sides flat from 10 MiB to 1 GiB (bar ≤ +64 MiB), a pull of rows naming files against the same rows "
            + "without (bar ≤ 1.1×), and PostgreSQL chunks against large objects (recorded)",
        run: { try run() }
    )

    /// The sizes in MiB: `OUTPOST_BENCH_FILES_SIZES` (`10,1024` by default).
    static func sizes() throws -> [Int] {
        guard let text = ProcessInfo.processInfo.environment["OUTPOST_BENCH_FILES_SIZES"], !text.isEmpty else { return [10, 1024] }
        let sizes = text.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !sizes.isEmpty, sizes.allSatisfy({ $0 > 0 && $0 <= 2047 }) else {
            throw BenchmarkError("OUTPOST_BENCH_FILES_SIZES must list sizes in MiB (1–2047), like 10,1024")
        }
        return sizes
    }

    static func runs(_ mebibytes: Int) -> Int { mebibytes <= 64 ? 7 : 1 }

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        let workspace = try TemporaryFolder("files")
        defer { workspace.remove() }
        try transfers(workspace: workspace, into: &result)
        try FilesPullWorkload.measure(workspace: workspace, into: &result)
        try FilesPostgresWorkload.measure(into: &result)
        return result
    }

    // MARK: 1–2. Transfers and memory

    struct Measured {
        var mebibytes: Int
        var upload = Samples()
        var routes = Samples()
        var rawPut = Samples()
        var socketPut = Samples()
        var socketGet = Samples()
        var download = Samples()
        var rawGet = Samples()
        var routeGet = Samples()
        var rangesGet = Samples()
        var uploadRatios: [Double] = []
        var routesRatios: [Double] = []
        var downloadRatios: [Double] = []
        var importSeconds = Samples()
        var serverStartKiB = 0
        var serverPeakKiB = 0
        var rawServerPeakKiB = 0
        var uploaderPeakKiB = 0
        var routesPeakKiB = 0
        var downloaderPeakKiB = 0
        var rawClientPeakKiB = 0
    }

    static func transfers(workspace: TemporaryFolder, into result: inout BenchmarkResult) throws {
        let server = try siblingExecutable("sync-server")
        let bench = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
        var measured: [Measured] = []
        for mebibytes in try sizes() {
            var size = Measured(mebibytes: mebibytes)
            let bytes = Int64(mebibytes) * Int64(mebibyte)
            let data = try workspace.folder("server-\(mebibytes)")
            let signer = try TokenKey.signer(secretFile: nil, dataDirectory: data, environment: [:])
            let uploader = signer.sign(
                DeviceIdentity(
                    tenant: FilesDevice.tenant, userID: FilesDevice.userID, deviceID: "phone-up", teams: [FilesDevice.team], expiresAt: 4_102_444_800)
            )
            let downloader = signer.sign(
                DeviceIdentity(tenant: FilesDevice.tenant, userID: FilesDevice.userID, deviceID: "phone-down", expiresAt: 4_102_444_800))
            let sync = try ChildProcess(
                server,
                [
                    "serve", "--data", data.path, "--port", "0", "--secret-file", data.appendingPathComponent(TokenKey.fileName).path, "--rate", "0",
                    "--housekeeping-interval", "0",
                ],
                logs: workspace.url, name: "sync-server-\(mebibytes)", environment: ["LOG_LEVEL": "warning"])
            defer { sync.stop() }
            let syncURL = "http://127.0.0.1:\(try port(of: sync))"
            let rawFolder = try workspace.folder("raw-server-\(mebibytes)")
            let raw = try ChildProcess(
                bench, [FilesRawServer.command, "--folder", rawFolder.path], logs: workspace.url, name: "raw-server-\(mebibytes)")
            defer { raw.stop() }
            let rawURL = "http://127.0.0.1:\(try port(of: raw))"
            size.serverStartKiB = ProcessMemory.status("VmHWM", pid: sync.pid)

            let source = workspace.url.appendingPathComponent("source-\(mebibytes).bin")
            try writeSource(source, bytes: bytes, seed: UInt64(mebibytes))
            for run in 0..<runs(mebibytes) {
                // A different file each run (its bytes 8–15), so the server never answers `stored`.
                try mark(source, run: run)
                let name = "file-\(mebibytes)-\(run)"
                // Each pair in turn, the raw one first, so the machine's load meets both alike.
                let put = try device(bench, ["raw-put", "--url", "\(rawURL)/blob/\(name)", "--source", source.path], workspace, "raw-put-\(name)")
                let socketPut = try device(
                    bench, ["socket-put", "--url", "\(rawURL)/blob/s-\(name)", "--source", source.path], workspace, "socket-put-\(name)")
                // Through the engine where the contract takes the file (IssueLogged's photo_file,
                // 25 MB); through the routes as the engine sends them at every size (a new file
                // for each, so neither finds it stored).
                var upload: FilesDevice.Report?
                if mebibytes <= engineUploadMiB {
                    let up = try workspace.folder("up-\(name)")
                    upload = try device(
                        bench, ["upload", "--server", syncURL, "--token", uploader, "--folder", up.path, "--source", source.path], workspace,
                        "up-\(name)")
                    workspace.remove(up)
                    try mark(source, run: run + 1_000)
                }
                let routesFolder = try workspace.folder("routes-\(name)")
                let routes = try device(
                    bench, ["upload-routes", "--server", syncURL, "--token", uploader, "--folder", routesFolder.path, "--source", source.path],
                    workspace, "routes-\(name)")
                workspace.remove(routesFolder)
                let getFolder = try workspace.folder("raw-get-\(name)")
                let get = try device(
                    bench, ["raw-get", "--url", "\(rawURL)/blob/\(name)", "--folder", getFolder.path, "--size", "\(bytes)"], workspace,
                    "raw-get-\(name)")
                let socketGet = try device(
                    bench, ["socket-get", "--url", "\(rawURL)/blob/s-\(name)", "--folder", getFolder.path, "--size", "\(bytes)"], workspace,
                    "socket-get-\(name)")
                workspace.remove(getFolder)
                workspace.remove(rawFolder.appendingPathComponent(name))
                workspace.remove(rawFolder.appendingPathComponent("s-\(name)"))
                size.socketPut.append(socketPut.seconds)
                size.socketGet.append(socketGet.seconds)
                let down = try workspace.folder("down-\(name)")
                let download = try device(
                    bench,
                    [
                        "download", "--server", syncURL, "--token", downloader, "--folder", down.path, "--sha256", routes.sha256, "--size",
                        "\(bytes)",
                    ], workspace, "down-\(name)")
                workspace.remove(down)
                // Where the download's time goes: the same route asked for the whole file, by the raw client.
                let routeFolder = try workspace.folder("route-get-\(name)")
                let route = try device(
                    bench,
                    [
                        "raw-get", "--url", "\(syncURL)/sync/v1/files/\(routes.sha256)", "--token", downloader, "--folder", routeFolder.path,
                        "--size", "\(bytes)",
                    ], workspace, "route-get-\(name)")
                let ranges = try device(
                    bench,
                    [
                        "download-routes", "--server", syncURL, "--token", downloader, "--folder", routeFolder.path, "--sha256", routes.sha256,
                        "--size", "\(bytes)",
                    ], workspace, "ranges-get-\(name)")
                workspace.remove(routeFolder)
                size.routeGet.append(route.seconds)
                size.rangesGet.append(ranges.seconds)
                guard upload.map({ $0.bytes == bytes }) ?? true, routes.bytes == bytes, download.bytes == bytes, put.bytes == bytes,
                    get.bytes == bytes
                else { throw BenchmarkError("a transfer of \(name) moved the wrong number of bytes") }
                size.rawPut.append(put.seconds)
                if let upload {
                    size.upload.append(upload.seconds)
                    size.importSeconds.append(upload.importSeconds)
                    size.uploadRatios.append(put.seconds / upload.seconds)
                    size.uploaderPeakKiB = max(size.uploaderPeakKiB, upload.peakKiB)
                }
                size.routes.append(routes.seconds)
                size.routesRatios.append(put.seconds / routes.seconds)
                size.routesPeakKiB = max(size.routesPeakKiB, routes.peakKiB)
                size.rawGet.append(get.seconds)
                size.download.append(download.seconds)
                size.downloadRatios.append(get.seconds / download.seconds)
                size.downloaderPeakKiB = max(size.downloaderPeakKiB, download.peakKiB)
                size.rawClientPeakKiB = max(size.rawClientPeakKiB, put.peakKiB, get.peakKiB)
            }
            size.serverPeakKiB = ProcessMemory.status("VmHWM", pid: sync.pid)
            size.rawServerPeakKiB = ProcessMemory.status("VmHWM", pid: raw.pid)
            sync.stop()
            raw.stop()
            try? FileManager.default.removeItem(at: source)
            workspace.remove(data)
            workspace.remove(rawFolder)
            measured.append(size)
        }
        describe(measured, into: &result)
    }

    static func describe(_ measured: [Measured], into result: inout BenchmarkResult) {
        result.fact(
            "transfers",
            "sync-server serve (SQLite, data-folder blob store, --rate 0) and the raw server (`outpost-bench files-raw-server`: Hummingbird, "
                + "PUT streamed to a file and fsynced, GET read back in 1 MiB pieces), each a fresh process per size on 127.0.0.1; each device "
                + "transfer a child process (`outpost-bench files-device`, URLSession): engine upload = importFile for IssueLogged.photo_file, "
                + "an IssueLogged naming it, then syncNow() (≤ \(engineUploadMiB) MiB: the field's limit); routes upload = the engine's requests "
                + "(POST, 4 MiB PATCHes from the store's copy); download = a second store's engine.file(for:) (ranges from 4 MiB doubling to 64 MiB); "
                + "raw = one PUT from the file, one GET to a file; a new file for every upload")
        for size in measured {
            let bytes = Double(size.mebibytes * mebibyte)
            let label = size.mebibytes >= 1024 && size.mebibytes % 1024 == 0 ? "\(size.mebibytes / 1024) GiB" : "\(size.mebibytes) MiB"
            func throughput(_ samples: Samples) -> (String, String) {
                (
                    Format.fixed(bytes / samples.median / Double(mebibyte), 1) + " MiB/s",
                    Format.fixed(bytes / samples.min / Double(mebibyte), 1) + " MiB/s"
                )
            }
            let runs = size.routes.values.count
            result.fact(
                label,
                "\(runs) run\(runs == 1 ? "" : "s")"
                    + (size.importSeconds.values.isEmpty
                        ? "" : "; importFile \(Format.duration(size.importSeconds.median)) (not in the upload's time)"))
            var rows: [(String, Samples, String)] = []
            if !size.upload.values.isEmpty {
                rows.append(
                    (
                        "upload, engine syncNow(), \(label)", size.upload,
                        "pairs \(ratios(size.uploadRatios)); \(Format.ratio(size.socketPut.median / size.upload.median)) the socket's"
                    ))
            }
            rows += [
                (
                    "upload, the routes as the engine sends them, \(label)", size.routes,
                    "pairs \(ratios(size.routesRatios)); \(Format.ratio(size.socketPut.median / size.routes.median)) the socket's"
                ),
                ("raw PUT (URLSession), \(label)", size.rawPut, ""),
                ("raw PUT (plain socket), \(label)", size.socketPut, ""),
                (
                    "download, engine file(for:), \(label)", size.download,
                    "pairs \(ratios(size.downloadRatios)); \(Format.ratio(size.socketGet.median / size.download.median)) the socket's"
                ),
                ("raw GET (URLSession), \(label)", size.rawGet, ""),
                ("raw GET (plain socket), \(label)", size.socketGet, ""),
                (
                    "  sync-server's file route, whole file, raw client, \(label)", size.routeGet,
                    "no Range, no hash on the device; \(Format.ratio(size.rawGet.median / size.routeGet.median)) raw (URLSession)"
                ),
                (
                    "  the engine's ranges alone (transport, each to a file), \(label)", size.rangesGet,
                    "no hash, no store; \(Format.ratio(size.rawGet.median / size.rangesGet.median)) raw (URLSession)"
                ),
            ]
            for (name, samples, note) in rows {
                let (median, min) = throughput(samples)
                result.rows.append(.init(name, median: "\(median) (\(Format.duration(samples.median)))", min: min, note: note))
            }
            result.rows.append(
                .init(
                    "peak memory (VmHWM), \(label)", median: "server \(mebibytes(size.serverPeakKiB))",
                    min: "after start \(mebibytes(size.serverStartKiB))",
                    note: (size.upload.values.isEmpty ? "" : "engine upload \(mebibytes(size.uploaderPeakKiB)), ")
                        + "routes upload \(mebibytes(size.routesPeakKiB)), download \(mebibytes(size.downloaderPeakKiB)); "
                        + "raw server \(mebibytes(size.rawServerPeakKiB)), raw client \(mebibytes(size.rawClientPeakKiB))"))
            let (uploadName, uploadRatios) =
                size.upload.values.isEmpty ? ("routes upload", size.routesRatios) : ("engine upload", size.uploadRatios)
            for (name, values) in [(uploadName, uploadRatios), ("download", size.downloadRatios)] {
                let ratio = median(values)
                result.check(
                    "\(name) throughput ≥ \(Format.fixed(barThroughput, 1))× raw, \(label)", ratio >= barThroughput,
                    "\(Format.ratio(ratio)) (median of \(values.count) pair\(values.count == 1 ? "" : "s"))")
            }
        }
        guard let small = measured.min(by: { $0.mebibytes < $1.mebibytes }), let large = measured.max(by: { $0.mebibytes < $1.mebibytes }),
            large.mebibytes > small.mebibytes
        else {
            result.fact("memory flatness", "not judged: one size only (OUTPOST_BENCH_FILES_SIZES)")
            return
        }
        let sides: [(String, Int, Int)] = [
            ("server", small.serverPeakKiB, large.serverPeakKiB),
            ("uploading device (routes)", small.routesPeakKiB, large.routesPeakKiB),
            ("downloading device", small.downloaderPeakKiB, large.downloaderPeakKiB),
        ]
        for (side, low, high) in sides {
            let growth = high - low
            result.check(
                "\(side) peak memory flat (\(large.mebibytes) MiB within \(barMemoryMiB) MiB of \(small.mebibytes) MiB)",
                growth <= barMemoryMiB * 1024,
                "\(mebibytes(high)) against \(mebibytes(low)) (\(growth >= 0 ? "+" : "")\(Format.fixed(Double(growth) / 1024, 1)) MiB)")
        }
    }

    static func median(_ values: [Double]) -> Double {
        var samples = Samples()
        for value in values { samples.append(value) }
        return samples.median
    }

    static func ratios(_ values: [Double]) -> String {
        values.map { Format.fixed($0, 2) }.joined(separator: " ")
    }

    static func mebibytes(_ kib: Int) -> String { Format.fixed(Double(kib) / 1024, 1) + " MiB" }

    /// The port in a child's `listening on http://127.0.0.1:PORT` line.
    static func port(of child: ChildProcess) throws -> Int {
        let line = try child.waitForLine(containing: "listening on http://", timeout: 60)
        guard let address = line.range(of: "http://127.0.0.1:"), let port = Int(line[address.upperBound...].prefix { $0.isNumber }) else {
            throw BenchmarkError("cannot read the port in '\(line)'")
        }
        return port
    }

    /// Runs `outpost-bench files-device ARGUMENTS` and returns its report.
    static func device(_ bench: URL, _ arguments: [String], _ workspace: TemporaryFolder, _ name: String) throws -> FilesDevice.Report {
        let child = try ChildProcess(bench, [FilesDevice.command] + arguments, logs: workspace.url, name: name)
        try child.waitForSuccess()
        guard let line = child.output.split(separator: "\n").last,
            let report = try? JSONDecoder().decode(FilesDevice.Report.self, from: Data(line.utf8))
        else { throw BenchmarkError("files-device \(arguments.first ?? "") printed no report: \(child.errors.suffix(500))") }
        try? FileManager.default.removeItem(at: child.stdoutURL)
        try? FileManager.default.removeItem(at: child.stderrURL)
        return report
    }

    /// `bytes` pseudo-random bytes (incompressible, as photos and videos are), written 1 MiB at a time.
    static func writeSource(_ url: URL, bytes: Int64, seed: UInt64) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else { throw BenchmarkError("cannot create \(url.path)") }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var written: Int64 = 0
        var words = [UInt64](repeating: 0, count: mebibyte / 8)
        while written < bytes {
            for index in words.indices {
                // xorshift64*
                state ^= state >> 12
                state ^= state << 25
                state ^= state >> 27
                words[index] = state &* 0x2545_F491_4F6C_DD1D
            }
            if written == 0 { words[0] = 0xE0FF_D8FF }  // FF D8 FF E0: a JPEG's first bytes, little-endian
            let count = Int(min(Int64(mebibyte), bytes - written))
            try words.withUnsafeBytes { try handle.write(contentsOf: Data($0.prefix(count))) }
            written += Int64(count)
        }
    }

    /// Writes `run` into the file's bytes 8 to 15 (after the JPEG signature).
    static func mark(_ url: URL, run: Int) throws {
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        try handle.seek(toOffset: 8)
        try handle.write(contentsOf: withUnsafeBytes(of: UInt64(run + 1).littleEndian) { Data($0) })
    }
}
