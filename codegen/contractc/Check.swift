import ArgumentParser
import ContractCompiler
import Foundation

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that the contracts stay compatible with every released version still supported.",
        discussion: """
            Compares with contracts.lock (default) or with the contracts at a git revision (--against).

            The rollout gate (--fleet FILE, or --fleet-url URL --token-file FILE): for each contract \
            whose oldest_supported rises above the value it is compared with, counts the census's \
            active devices that run an older version of it; the server would refuse them (426) and \
            they would purge its rows. More than --max-cutoff percent of the census's active devices \
            is a FLEET_CUTOFF_EXCEEDED error; otherwise the count is a `fleet:` line on standard \
            output. A census that cannot be read or fetched exits 2 before anything is checked.
            """
    )

    @OptionGroup var options: ContractOptions
    @OptionGroup var lockOption: LockOption

    @Option(name: .long, help: "Compare with the contracts folder at this git revision instead of the lock.")
    var against: String?

    @OptionGroup(title: "Rollout gate") var fleet: FleetOptions

    func run() throws {
        // The census first: a bad one stops the run before anything is reported.
        let census = try fleet.census()
        let loaded = options.load()
        guard let set = loaded.contracts, !loaded.diagnostics.hasErrors else {
            report(loaded.diagnostics, format: options.format)
            throw ExitCode(1)
        }
        var result: ContractCompiler.CheckResult
        var baseline: String
        var rewrite: (from: String, to: String)?
        if let against {
            let previous = try GitRevision.contracts(at: against, folder: options.contracts)
            defer { try? FileManager.default.removeItem(atPath: previous.temporaryRoot) }
            // Locations in the other revision read as `REV:path`, as git writes them.
            rewrite = (previous.temporaryRoot + "/", against + ":")
            let previousLoad = ContractCompiler.load(directory: previous.folder, today: options.today)
            guard let previousSet = previousLoad.contracts else {
                FileHandle.standardError.write(Data("error: the contracts at \(against) cannot be read\n".utf8))
                throw ExitCode(1)
            }
            result = ContractCompiler.check(set, against: previousSet)
            baseline = "the contracts at \(against)"
        } else {
            let path = lockOption.path(contracts: options.contracts)
            result = ContractCompiler.check(set, lockPath: path)
            baseline = path
        }
        result.diagnostics.append(contentsOf: loaded.diagnostics)
        let gate = census.map {
            FleetGate.evaluate(set, releasedOldestSupported: result.releasedOldestSupported, census: $0, maxCutoff: fleet.maxCutoff)
        }
        if let gate { result.diagnostics.append(contentsOf: gate.diagnostics) }
        report(result.diagnostics, format: options.format, rewriting: rewrite, jsonMembers: gate.map { [("fleet", $0.json)] } ?? [])
        if options.format == .text {
            for line in result.allowancesInForce { print("allowed: \(line)") }
            for line in gate?.notes ?? [] { print("fleet: \(line)") }
        }
        if result.diagnostics.hasErrors { throw ExitCode(1) }
        if options.format == .text {
            print("\(set.contracts.count) contracts are compatible with \(baseline) (\(result.releasedContracts) with released versions).")
        }
    }
}

/// Extracts a contracts folder as it is at a git revision, for `check --against`.
enum GitRevision {
    struct Extracted {
        var temporaryRoot: String
        var folder: String
    }

    static func contracts(at revision: String, folder: String) throws -> Extracted {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("contractc-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let prefix = try git(["rev-parse", "--show-prefix"]).trimmingCharacters(in: .whitespacesAndNewlines)
        let path = (prefix + folder).replacingOccurrences(of: "//", with: "/")
        let archive = root + "/contracts.tar"
        _ = try git(["archive", "--format=tar", "--output", archive, revision, "--", path])
        _ = try run("/usr/bin/env", ["tar", "-xf", archive, "-C", root])
        return Extracted(temporaryRoot: root, folder: root + "/" + path)
    }

    private static func git(_ arguments: [String]) throws -> String {
        try run("/usr/bin/env", ["git"] + arguments)
    }

    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            FileHandle.standardError.write(
                Data("error: `\(arguments.joined(separator: " "))` failed: \(String(decoding: message, as: UTF8.self))".utf8))
            throw ExitCode(2)
        }
        return String(decoding: data, as: UTF8.self)
    }
}
