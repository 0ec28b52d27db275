import ArgumentParser
import ContractCompiler
import Foundation

@main
struct Contractc: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contractc",
        abstract: "The Outpost contract compiler: YAML contracts in, Swift DTOs and SQLite migrations out.",
        discussion: """
            Exit codes: 0 success (warnings allowed); 1 the contracts have errors, break compatibility, \
            or the generated code is out of date; 2 an output folder that cannot be written or a git \
            command that failed; 64 bad command-line usage.
            """,
        subcommands: [Validate.self, Generate.self, Check.self, Lock.self, Explain.self],
        defaultSubcommand: nil
    )
}

struct ContractOptions: ParsableArguments {
    @Option(name: .long, help: "The contracts folder (holds contracts.yaml).")
    var contracts: String = "contracts"

    @Option(name: .customLong("format"), help: "Diagnostics format: text, json or github.")
    var formatOption: FormatOption = .text

    var format: DiagnosticFormat { formatOption.format }

    @Option(name: .long, help: ArgumentHelp("The date allowances are checked against (YYYY-MM-DD); today in UTC by default.", visibility: .hidden))
    var today: String?

    func load() -> ContractCompiler.LoadResult {
        ContractCompiler.load(directory: contracts, today: today)
    }
}

struct LockOption: ParsableArguments {
    @Option(name: .long, help: "The lock file (default: contracts.lock in the contracts folder).")
    var lock: String?

    func path(contracts: String) -> String {
        lock ?? ContractCompiler.defaultLockPath(contracts: contracts)
    }
}

enum FormatOption: String, ExpressibleByArgument, CaseIterable {
    case text, json, github

    var format: DiagnosticFormat { DiagnosticFormat(rawValue: rawValue)! }
}

/// Prints diagnostics to standard error and says whether the run may go on.
func report(_ diagnostics: DiagnosticCollector, format: DiagnosticFormat, rewriting prefix: (from: String, to: String)? = nil) {
    var text = format.render(diagnostics)
    if let prefix { text = text.replacingOccurrences(of: prefix.from, with: prefix.to) }
    guard !text.isEmpty else { return }
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

struct Validate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every contract and print every problem; writes nothing."
    )

    @OptionGroup var options: ContractOptions

    func run() throws {
        let result = options.load()
        report(result.diagnostics, format: options.format)
        if result.diagnostics.hasErrors || result.contracts == nil { throw ExitCode(1) }
        if options.format == .text {
            print("\(result.contracts!.contracts.count) contracts are valid.")
        }
    }
}

struct Generate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate the contracts and generate Swift code into the output folder."
    )

    @OptionGroup var options: ContractOptions
    @OptionGroup var lockOption: LockOption

    @Option(name: .long, help: "The folder to generate into; the generator owns it.")
    var output: String = "Sources/Contracts"

    @Flag(name: .long, help: "Write nothing; exit 1 if the output folder is not exactly what would be generated.")
    var check = false

    func run() throws {
        var result = options.load()
        let history = ContractCompiler.history(lockPath: lockOption.path(contracts: options.contracts), diagnostics: &result.diagnostics)
        report(result.diagnostics, format: options.format)
        guard let set = result.contracts, !result.diagnostics.hasErrors else { throw ExitCode(1) }
        let files = ContractCompiler.generate(set, history: history)
        if check {
            let stale = ContractCompiler.differences(files, in: output)
            if stale.isEmpty {
                print("\(output) is up to date (\(files.count) files).")
                return
            }
            FileHandle.standardError.write(Data((
                "error: \(output) is out of date:\n" + stale.map { "  \($0)" }.joined(separator: "\n")
                    + "\nhelp: run `make codegen` and commit the result\n"
            ).utf8))
            throw ExitCode(1)
        }
        do {
            let summary = try ContractCompiler.write(files, to: output)
            if summary.written.isEmpty && summary.removed.isEmpty {
                print("\(output) is up to date (\(files.count) files).")
            } else {
                print(
                    "Generated \(files.count) files into \(output): \(summary.written.count) written, "
                        + "\(summary.unchanged.count) unchanged, \(summary.removed.count) removed."
                )
            }
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that the contracts stay compatible with every released version still supported.",
        discussion: "Compares with contracts.lock (default) or with the contracts at a git revision (--against)."
    )

    @OptionGroup var options: ContractOptions
    @OptionGroup var lockOption: LockOption

    @Option(name: .long, help: "Compare with the contracts folder at this git revision instead of the lock.")
    var against: String?

    func run() throws {
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
        report(result.diagnostics, format: options.format, rewriting: rewrite)
        if options.format == .text {
            for line in result.allowancesInForce { print("allowed: \(line)") }
        }
        if result.diagnostics.hasErrors { throw ExitCode(1) }
        if options.format == .text {
            print("\(set.contracts.count) contracts are compatible with \(baseline) (\(result.releasedContracts) with released versions).")
        }
    }
}

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record the current version of every contract as released, with its migrations' checksums.",
        discussion: "Refuses when `contractc check` finds an error: a released version is never overwritten."
    )

    @OptionGroup var options: ContractOptions
    @OptionGroup var lockOption: LockOption

    func run() throws {
        let loaded = options.load()
        guard let set = loaded.contracts, !loaded.diagnostics.hasErrors else {
            report(loaded.diagnostics, format: options.format)
            throw ExitCode(1)
        }
        let path = lockOption.path(contracts: options.contracts)
        let (summary, diagnostics) = ContractCompiler.lock(set, lockPath: path)
        report(diagnostics, format: options.format)
        guard let summary else { throw ExitCode(1) }
        if summary.newVersions.isEmpty {
            print(summary.wrote ? "Updated \(path); no new contract versions." : "\(path) is up to date.")
        } else {
            print("Locked in \(path): \(summary.newVersions.joined(separator: ", ")).")
        }
    }
}

struct Explain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Explain a rule: why it exists, when it applies, and how to fix a violation."
    )

    @Argument(help: "A rule id, for example FIELD_REMOVED. Without one, list every rule.")
    var rule: String?

    func run() throws {
        guard let rule else {
            for id in RuleCatalog.allRules {
                print("\(id.rawValue.padding(toLength: 32, withPad: " ", startingAt: 0)) \(RuleCatalog.explanation(for: id)!.title)")
            }
            return
        }
        let id = RuleID(rule.uppercased())
        guard let explanation = RuleCatalog.explanation(for: id) else {
            let guess = Names.closest(to: id.rawValue, among: RuleCatalog.allRules.map(\.rawValue))
            FileHandle.standardError.write(Data("error: unknown rule '\(rule)'\(guess.map { "; did you mean \($0)?" } ?? "")\nhelp: `contractc explain` lists every rule\n".utf8))
            throw ExitCode(1)
        }
        print(explanation.rendered)
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
            FileHandle.standardError.write(Data("error: `\(arguments.joined(separator: " "))` failed: \(String(decoding: message, as: UTF8.self))".utf8))
            throw ExitCode(2)
        }
        return String(decoding: data, as: UTF8.self)
    }
}
