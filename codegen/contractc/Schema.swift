import ArgumentParser
import ContractCompiler
import Foundation

struct Schema: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the JSON Schema of the contract language beside the contracts, for editors.",
        discussion: """
            Writes \(ContractJSONSchema.fileName) into the contracts folder (or --output) from the compiler's \
            own grammar, and starts every contract file without one with the line \
            `\(ContractJSONSchema.modeline(relativePath: ContractJSONSchema.fileName))` (the path relative to \
            the file), so yaml-language-server (VS Code's YAML extension, Neovim, Helix…) completes and checks \
            keys. With --check it writes nothing and exits 1 if the schema is stale or a file lacks the line.
            """
    )

    @Option(name: .long, help: "The contracts folder (holds contracts.yaml).")
    var contracts: String = "contracts"

    @Option(name: .long, help: "Where to write the schema (default: the contracts folder's \(ContractJSONSchema.fileName)).")
    var output: String?

    @Flag(name: .long, help: "Write nothing; exit 1 if the schema or a file's first line is not what it would write.")
    var check = false

    func run() throws {
        let folder = URL(fileURLWithPath: contracts)
        let schemaURL = output.map { URL(fileURLWithPath: $0) } ?? folder.appendingPathComponent(ContractJSONSchema.fileName)
        let schema = ContractJSONSchema.render()
        var problems: [String] = []
        if (try? String(contentsOf: schemaURL, encoding: .utf8)) != schema {
            if check {
                problems.append("\(schemaURL.path) is not the schema of this compiler")
            } else {
                try write(schema, to: schemaURL)
                print("Wrote \(schemaURL.path).")
            }
        }
        for file in contractFiles(in: folder) {
            let modeline = ContractJSONSchema.modeline(relativePath: relativePath(from: file.deletingLastPathComponent(), to: schemaURL))
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { continue }
            let firstLine = text.prefix { $0 != "\n" }
            if firstLine == modeline { continue }
            if check {
                problems.append("\(file.path) does not start with `\(modeline)`")
                continue
            }
            // A stale modeline (another path) is replaced; otherwise the line goes on top.
            let body = firstLine.hasPrefix("# yaml-language-server:") ? String(text.dropFirst(firstLine.count + 1)) : text
            try write(modeline + "\n" + body, to: file)
            print("Named the schema on the first line of \(file.path).")
        }
        guard problems.isEmpty else {
            FileHandle.standardError.write(
                Data(
                    (problems.map { "error: \($0)" }.joined(separator: "\n")
                        + "\nhelp: run `contractc schema` (or `swift package generate-contracts`) and commit the result\n").utf8))
            throw ExitCode(1)
        }
        if check { print("\(schemaURL.path) is up to date, and every contract file names it.") }
    }

    private func write(_ text: String, to url: URL) throws {
        do {
            try Data(text.utf8).write(to: url, options: .atomic)
        } catch {
            FileHandle.standardError.write(Data("error: cannot write \(url.path): \(error.localizedDescription)\n".utf8))
            throw ExitCode(2)
        }
    }

    /// Every `.yaml` and `.yml` file below the folder, in path order.
    private func contractFiles(in folder: URL) -> [URL] {
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else { return [] }
        return walker.compactMap { $0 as? URL }.filter { ["yaml", "yml"].contains($0.pathExtension) }
            .map(\.standardizedFileURL).sorted { $0.path < $1.path }
    }

    /// `../contract.schema.json` from `contracts/entities` to `contracts/contract.schema.json`.
    private func relativePath(from folder: URL, to file: URL) -> String {
        let from = folder.standardizedFileURL.pathComponents
        let to = file.standardizedFileURL.pathComponents
        let common = zip(from, to).prefix { $0 == $1 }.count
        return (Array(repeating: "..", count: from.count - common) + to[common...]).joined(separator: "/")
    }
}
