import ContractCompiler
import Foundation

/// The quality bar (docs/PERFORMANCE.md): "`contractc generate` on 200 contracts: under 1 s".
///
/// Synthesizes 200 realistic contracts (seeded), checks they are valid, then measures in one run:
/// the real `contractc generate` as a child process writing its output (the bar), the same
/// pipeline in process (load + generate), and a baseline of only reading and parsing the same
/// YAML files with the same parser, so the figure reads both absolute and as a ratio. Two CLI
/// runs must write byte-identical output, equal to what the in-process pipeline renders.
enum CodegenBenchmark {
    static let contractCount = 200
    /// Timed runs of each measurement, after one untimed warm-up.
    static let runs = 7
    /// The bar: median wall time of `contractc generate`, in seconds.
    static let barSeconds = 1.0

    static let benchmark = Benchmark(
        name: "codegen",
        summary: "`contractc generate` on \(contractCount) synthesized contracts (bar: median under 1 s)",
        run: { try run() }
    )

    static func run() throws -> BenchmarkResult {
        var result = BenchmarkResult()
        let contractc = try locateContractc()
        let workspace = try Workspace()
        defer { workspace.remove() }

        // 1. Synthesize and write the contracts.
        let synthesizer = ContractSynthesizer(contractCount: contractCount)
        let synthesized = synthesizer.synthesize()
        let contracts = workspace.path("contracts")
        var yamlBytes = 0
        for file in synthesized.files {
            let data = Data(file.text.utf8)
            yamlBytes += data.count
            try workspace.write(data, to: "contracts/" + file.path)
        }
        let summary = synthesized.summary
        guard summary.missingTypes.isEmpty else {
            throw BenchmarkError(
                "the synthesized contracts use no field of type \(summary.missingTypes.joined(separator: ", ")); fix ContractSynthesizer")
        }

        // 2. They must be valid: a benchmark of the error path would measure something else.
        let loaded = ContractCompiler.load(directory: contracts)
        let diagnostics = loaded.diagnostics
        guard let set = loaded.contracts, !diagnostics.hasErrors else {
            let shown = diagnostics.sorted.filter { $0.severity == .error }.prefix(25)
            Console.error(shown.map(\.rendered).joined(separator: "\n"))
            throw BenchmarkError(
                "the \(contractCount) synthesized contracts do not validate: \(diagnostics.errorCount) errors "
                    + "(the first \(shown.count) above). The synthesizer (bench/OutpostBench/ContractSynthesizer.swift) "
                    + "and the compiler's rules disagree; fix the synthesizer, the figures would be meaningless"
            )
        }
        guard set.contracts.count == contractCount else {
            throw BenchmarkError("loaded \(set.contracts.count) contracts, synthesized \(contractCount)")
        }
        let expected = ContractCompiler.generate(set)
        let expectedSnapshot = Dictionary(uniqueKeysWithValues: expected.map { ($0.path, Data($0.contents.utf8)) })
        let outputBytes = expectedSnapshot.values.reduce(0) { $0 + $1.count }

        #if DEBUG
            result.fact("build", "DEBUG — these figures are not representative; run `make bench` (release)")
        #endif
        result.fact(
            "contracts",
            "\(contractCount) (\(summary.entities) entities, \(summary.events) events) in \(synthesized.files.count) YAML files, "
                + "\(Format.bytes(yamlBytes)); seed 0x\(String(synthesizer.seed, radix: 16))"
        )
        result.fact(
            "fields",
            "\(summary.fields) synced (\(summary.minFields)–\(summary.maxFields) per contract), \(summary.localFields) local; "
                + "\(summary.relations) relations, \(summary.indexes) indexes"
        )
        result.fact(
            "types used",
            TypeKind.allCases.map { "\($0.rawValue) \(summary.typeUse[$0.rawValue] ?? 0)" }.joined(separator: ", ")
        )
        result.fact(
            "validation",
            "\(diagnostics.errorCount) errors, \(diagnostics.warningCount) warnings"
        )
        result.fact("output", "\(expected.count) generated files, \(Format.bytes(outputBytes))")
        result.fact("contractc", contractc.path)
        result.fact("runs", "\(runs) timed after 1 warm-up, per measurement; wall clock")

        // 3. The real CLI, end to end, writing into a new folder each time. Folders are removed
        // only at the end, so no timed run pays for freeing the blocks of the last one, and each
        // run starts after a sync, so none pays for the last one's writes either.
        var cli = Samples()
        for run in 0...runs {
            let seconds = try generate(contractc, contracts: contracts, output: workspace.path("out-\(run)"), workspace: workspace)
            if run > 0 { cli.append(seconds) }  // run 0 is the warm-up
        }

        // For scale: the everyday `make codegen`, into a folder that is already current (the
        // warm-up's), where the compiler compares every file and writes none.
        var current = Samples()
        for run in 0...runs {
            Workspace.flush()
            let seconds = try launch(
                contractc, ["generate", "--contracts", contracts, "--output", workspace.path("out-0")], workspace: workspace,
                label: "contractc generate (output current)"
            )
            if run > 0 { current.append(seconds) }
        }

        // For scale: the same runs writing to memory (tmpfs). `ContractCompiler.write` writes each
        // file atomically, with an fsync per file, so on a slow or busy disk the write dominates;
        // on tmpfs the fsync costs nothing and what is left is the compiler. Informational; Linux only.
        var inMemory = Samples()
        if let memory = try Workspace(base: "/dev/shm") {
            defer { memory.remove() }
            for run in 0...runs {
                let seconds = try generate(contractc, contracts: contracts, output: memory.path("out-\(run)"), workspace: workspace)
                if run > 0 { inMemory.append(seconds) }
            }
        }

        // Process start-up alone, to read the CLI figure against.
        var startup = Samples()
        for run in 0...runs {
            let seconds = try launch(contractc, ["--help"], workspace: workspace, label: "contractc --help")
            if run > 0 { startup.append(seconds) }
        }

        // 4. The same pipeline in process: load (read, parse, decode, validate), generate, write.
        var load = Samples(), render = Samples(), pipeline = Samples(), write = Samples()
        for run in 0...runs {
            let loadTime = Timing.measure { ContractCompiler.load(directory: contracts) }
            guard let set = loadTime.value.contracts, !loadTime.value.diagnostics.hasErrors else {
                throw BenchmarkError("the in-process load found errors on run \(run)")
            }
            let renderTime = Timing.measure { ContractCompiler.generate(set) }
            let folder = workspace.path("in-process-\(run)")
            Workspace.flush()
            let writeTime = try Timing.measure { try ContractCompiler.write(renderTime.value, to: folder) }
            guard run > 0 else { continue }
            load.append(loadTime.seconds)
            render.append(renderTime.seconds)
            pipeline.append(loadTime.seconds + renderTime.seconds)
            write.append(writeTime.seconds)
        }

        // 5. Baseline: only read and parse the same files with the same parser.
        let yamlPaths = synthesized.files.map { contracts + "/" + $0.path }
        var parse = Samples()
        for run in 0...runs {
            let parsed = try Timing.measure { try parseOnly(yamlPaths) }
            guard parsed.value == yamlPaths.count else {
                throw BenchmarkError("the parse-only baseline parsed \(parsed.value) of \(yamlPaths.count) files")
            }
            if run > 0 { parse.append(parsed.seconds) }
        }

        // 6. Determinism: two separate CLI runs, and the in-process rendering, byte for byte.
        let first = try snapshot(workspace.path("out-1"))
        let last = try snapshot(workspace.path("out-\(runs)"))
        let cliDifference = difference(first, last)
        let inProcessDifference = difference(first, expectedSnapshot)

        result.rows = [
            .init(
                "contractc generate (CLI, child process, writes \(expected.count) files)", median: Format.duration(cli.median),
                min: Format.duration(cli.min), note: "the bar: median under \(Format.duration(barSeconds))"
            ),
            .init(
                "  for scale: the same, output already current", median: Format.duration(current.median),
                min: Format.duration(current.min), note: "compares \(expected.count) files, writes none"
            ),
            .init(
                "  for scale: the same, output on tmpfs (/dev/shm)",
                median: inMemory.count > 0 ? Format.duration(inMemory.median) : "n/a",
                min: inMemory.count > 0 ? Format.duration(inMemory.min) : "n/a", note: "no disk: what the compiler costs"
            ),
            .init(
                "  for scale: process start-up alone (contractc --help)", median: Format.duration(startup.median),
                min: Format.duration(startup.min), note: "launch, dynamic linking, argument parsing"
            ),
            .init(
                "in-process load (read, parse, decode, validate)", median: Format.duration(load.median),
                min: Format.duration(load.min)
            ),
            .init(
                "in-process generate (render \(expected.count) files)", median: Format.duration(render.median),
                min: Format.duration(render.min)
            ),
            .init(
                "in-process load + generate", median: Format.duration(pipeline.median), min: Format.duration(pipeline.min),
                note: "no process, no write"
            ),
            .init(
                "in-process write (\(expected.count) files, empty folder)", median: Format.duration(write.median),
                min: Format.duration(write.min), note: "atomic, one fsync per file"
            ),
            .init(
                "baseline: read + parse only (\(yamlPaths.count) YAML files)", median: Format.duration(parse.median),
                min: Format.duration(parse.min), note: "YAMLParser, the compiler's own"
            ),
            .init(
                "ratio CLI generate / parse-only", median: Format.ratio(cli.median / parse.median),
                min: Format.ratio(cli.min / parse.min), note: "medians; mins"
            ),
            .init(
                "ratio in-process load + generate / parse-only", median: Format.ratio(pipeline.median / parse.median),
                min: Format.ratio(pipeline.min / parse.min), note: "medians; mins"
            ),
        ]

        result.check(
            "valid input", true,
            "\(contractCount) synthesized contracts load with 0 errors (\(diagnostics.warningCount) warnings)"
        )
        result.check(
            "bar", cli.median < barSeconds,
            "contractc generate on \(contractCount) contracts: median \(Format.duration(cli.median)) "
                + (cli.median < barSeconds ? "<" : ">=") + " \(Format.duration(barSeconds)) "
                + "(\(Format.ratio(cli.median / parse.median)) the parse-only baseline)"
        )
        result.check(
            "deterministic", cliDifference == nil,
            cliDifference.map { "two CLI runs differ: \($0)" }
                ?? "two CLI runs wrote byte-identical output (\(first.count) files, "
                + "\(Format.bytes(first.values.reduce(0) { $0 + $1.count })))"
        )
        result.check(
            "same compiler", inProcessDifference == nil,
            inProcessDifference.map {
                "the CLI output differs from the in-process rendering (\($0)): contractc and outpost-bench were built "
                    + "from different ContractCompiler sources, so the in-process figures are not the CLI's. Rebuild "
                    + "both: `swift build -c release --product contractc && swift build -c release --product outpost-bench`"
            } ?? "the CLI output equals the in-process rendering, byte for byte"
        )
        return result
    }

    // MARK: Child processes

    /// `contractc` sits next to this binary in the build folder (`swift build --show-bin-path`).
    private static func locateContractc() throws -> URL {
        try siblingExecutable("contractc")
    }

    /// One `contractc generate` into a folder that does not exist yet; the wall time of the process.
    private static func generate(_ contractc: URL, contracts: String, output: String, workspace: Workspace) throws -> Double {
        workspace.remove(output)
        Workspace.flush()
        let seconds = try launch(
            contractc, ["generate", "--contracts", contracts, "--output", output], workspace: workspace,
            label: "contractc generate"
        )
        guard FileManager.default.fileExists(atPath: output + "/ContractRegistry.swift") else {
            throw BenchmarkError("contractc generate exited 0 but wrote no ContractRegistry.swift into \(output)")
        }
        return seconds
    }

    /// Runs a child process with its output in files (never a pipe that could fill up), and
    /// returns the wall time from launch to exit. A non-zero exit is an error with its stderr.
    private static func launch(_ executable: URL, _ arguments: [String], workspace: Workspace, label: String) throws -> Double {
        let stdoutPath = workspace.path("child.stdout"), stderrPath = workspace.path("child.stderr")
        guard FileManager.default.createFile(atPath: stdoutPath, contents: nil),
            FileManager.default.createFile(atPath: stderrPath, contents: nil),
            let stdout = FileHandle(forWritingAtPath: stdoutPath), let stderr = FileHandle(forWritingAtPath: stderrPath)
        else { throw BenchmarkError("cannot create the log files of \(label) in \(workspace.root)") }
        defer {
            try? stdout.close()
            try? stderr.close()
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = stdout
        process.standardError = stderr

        // Not `waitUntilExit()`: on Linux it polls the run loop every 50 ms, which would round
        // every figure up to the next 50 ms. The termination handler runs as soon as the child exits.
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        let clock = ContinuousClock()
        let start = clock.now
        try process.run()
        exited.wait()
        let seconds = Timing.seconds(clock.now - start)

        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            let errors = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
            throw BenchmarkError(
                "\(label) failed (status \(process.terminationStatus)): \(executable.path) \(arguments.joined(separator: " "))\n"
                    + errors.split(separator: "\n").prefix(25).joined(separator: "\n")
            )
        }
        return seconds
    }

    // MARK: Baseline

    /// Reads and parses every file as the loader does; returns how many parsed into a tree.
    private static func parseOnly(_ paths: [String]) throws -> Int {
        let parser = YAMLParser()
        var diagnostics = DiagnosticCollector()
        var parsed = 0
        for path in paths {
            guard let handle = FileHandle(forReadingAtPath: path) else { throw BenchmarkError("cannot read \(path)") }
            let data = try handle.read(upToCount: parser.maximumFileSize + 1) ?? Data()
            try handle.close()
            if parser.parse([UInt8](data), file: path, diagnostics: &diagnostics) != nil { parsed += 1 }
        }
        if diagnostics.hasErrors {
            throw BenchmarkError("the parse-only baseline found errors: \(diagnostics.renderedReport())")
        }
        return parsed
    }

    // MARK: Output comparison

    /// Every regular file below `folder`, by relative path.
    private static func snapshot(_ folder: String) throws -> [String: Data] {
        guard let enumerator = FileManager.default.enumerator(atPath: folder) else {
            throw BenchmarkError("cannot list \(folder)")
        }
        var files: [String: Data] = [:]
        while let relative = enumerator.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let path = folder + "/" + relative
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
                continue
            }
            guard let data = FileManager.default.contents(atPath: path) else { throw BenchmarkError("cannot read \(path)") }
            files[relative] = data
        }
        return files
    }

    /// The first difference between two file trees, or `nil` when they are identical.
    private static func difference(_ a: [String: Data], _ b: [String: Data]) -> String? {
        for path in Set(a.keys).union(b.keys).sorted() {
            switch (a[path], b[path]) {
            case (nil, _): return "\(path) is only in the second"
            case (_, nil): return "\(path) is only in the first"
            case (let x?, let y?) where x != y: return "\(path) differs (\(x.count) and \(y.count) bytes)"
            default: continue
            }
        }
        return nil
    }
}

/// A private temporary folder for one benchmark run, removed afterwards: the synthesized
/// contracts in `contracts/`, the output of each CLI run in `out-N/` (0 is the warm-up).
private struct Workspace {
    let root: String

    /// A folder in the system's temporary folder (`TMPDIR`).
    init() throws {
        try self.init(root: FileManager.default.temporaryDirectory.path)
    }

    /// A folder in `base`, or `nil` when `base` is not a writable folder (no `/dev/shm` on macOS).
    init?(base: String) throws {
        guard FileManager.default.isWritableFile(atPath: base) else { return nil }
        try self.init(root: base)
    }

    private init(root base: String) throws {
        root = base + "/outpost-bench-codegen-\(ProcessInfo.processInfo.processIdentifier)"
        try? FileManager.default.removeItem(atPath: root)
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        } catch {
            throw BenchmarkError("cannot create the temporary folder \(root): \(error)")
        }
    }

    func path(_ relative: String) -> String { root + "/" + relative }

    /// Writes every dirty page to disk (untimed), so a timed run starts from a quiet file system.
    static func flush() { sync() }

    func write(_ data: Data, to relative: String) throws {
        let url = URL(fileURLWithPath: path(relative))
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }

    func remove(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

    /// Removes the folder, unless `OUTPOST_BENCH_KEEP` is set (to read the synthesized contracts
    /// and the generated code afterwards).
    func remove() {
        if let keep = ProcessInfo.processInfo.environment["OUTPOST_BENCH_KEEP"], !keep.isEmpty, keep != "0" {
            Console.error("note: OUTPOST_BENCH_KEEP is set; kept \(root)")
            return
        }
        remove(root)
    }
}
