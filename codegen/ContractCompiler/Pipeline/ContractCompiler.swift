import Foundation

/// The contract compiler's pipeline: load (parse → decode) → validate → generate → write.
/// Each stage is usable alone; the `contractc` command only parses flags and calls these.
public enum ContractCompiler {
    /// What loading a contracts folder produced.
    public struct LoadResult: Sendable {
        /// The contracts, when the folder could be read well enough to check them; present even with errors.
        public var contracts: ContractSet?
        /// Every problem found while reading, parsing and decoding.
        public var diagnostics: DiagnosticCollector
    }

    /// One generated file, relative to the output folder.
    public struct GeneratedFile: Hashable, Sendable {
        /// The file's path relative to the output folder.
        public var path: String
        /// The file's whole text.
        public var contents: String

        /// A generated file from its path and text.
        public init(path: String, contents: String) {
            self.path = path
            self.contents = contents
        }
    }

    /// Reads, decodes and validates every contract of `directory`, collecting every problem.
    /// - Parameters:
    ///   - directory: the contracts folder, holding `contracts.yaml`.
    ///   - today: the date allowances are checked against (`YYYY-MM-DD`); today in UTC by default.
    public static func load(directory: String, today: String? = nil) -> LoadResult {
        var diagnostics = DiagnosticCollector()
        let loader = ContractLoader()
        let sources = loader.sources(in: directory, diagnostics: &diagnostics)
        return load(sources, directory: directory, today: today, diagnostics: diagnostics)
    }

    /// Decodes and validates files already read (``ContractLoader/sources(in:diagnostics:)``),
    /// after the `diagnostics` reading them gave: what ``load(directory:today:)`` does once the
    /// folder is read, and what the contract fuzz target feeds its bytes to.
    package static func load(
        _ sources: (manifest: ContractLoader.SourceFile?, contracts: [ContractLoader.SourceFile]), directory: String,
        today: String? = nil, diagnostics: DiagnosticCollector = DiagnosticCollector()
    ) -> LoadResult {
        var diagnostics = diagnostics
        let loader = ContractLoader()
        var decoder = ContractDecoder()
        let folderName = URL(fileURLWithPath: directory).standardizedFileURL.lastPathComponent

        var manifest: Manifest?
        if let file = sources.manifest,
            let root = loader.parser.parse(file.bytes, file: file.displayPath, diagnostics: &diagnostics)
        {
            manifest = decoder.decodeManifest(root, file: file.displayPath)
        }
        var contracts: [Contract] = []
        for file in sources.contracts {
            guard let root = loader.parser.parse(file.bytes, file: file.displayPath, diagnostics: &diagnostics) else {
                continue
            }
            if var contract = decoder.decodeContract(root, file: file.displayPath) {
                let relative =
                    file.displayPath.hasPrefix(directory)
                    ? String(file.displayPath.dropFirst(directory.count)).trimmingPrefix("/") : file.displayPath
                contract.sourcePath = folderName + "/" + relative
                contracts.append(contract)
            }
        }
        diagnostics.append(contentsOf: decoder.diagnostics)
        guard sources.manifest != nil || !contracts.isEmpty else {
            return LoadResult(contracts: nil, diagnostics: diagnostics)
        }
        let manifestFile = ContractLoader.join(directory, ContractLoader.manifestName)
        let haveManifest = manifest != nil
        let set = ContractSet(
            manifest: manifest ?? Manifest(file: manifestFile, scopes: [], compatibility: .init(entities: .full, events: .backward)),
            contracts: contracts
        )
        var validator = ContractValidator(set)
        validator.checkScopes = haveManifest
        if let today { validator.today = today }
        validator.run()
        diagnostics.append(contentsOf: validator.diagnostics)
        return LoadResult(contracts: set, diagnostics: diagnostics)
    }

    /// Renders every generated file for a valid contract set. Same input, byte-identical output.
    /// - Parameters:
    ///   - set: the contracts, loaded without errors.
    ///   - history: released versions per contract (from the lock), so migrations walk
    ///     from each released version to the next.
    public static func generate(_ set: ContractSet, history: [String: [Contract]] = [:]) -> [GeneratedFile] {
        let set = set.resolvingSince(history: history)
        let dto = DTOGenerator(set: set)
        let contractCount = "\(set.contracts.count) contract\(set.contracts.count == 1 ? "" : "s")"
        let folder = set.contracts.first.map { String($0.sourcePath.prefix { $0 != "/" }) } ?? "contracts"
        var files: [GeneratedFile] = []
        func add(_ path: String, source: String, _ body: String) {
            let header = "// Generated by contractc from \(source). Do not edit: change the contracts and run `contractc generate` again.\n\n"
            files.append(GeneratedFile(path: path, contents: header + body))
        }
        add("ContractRegistry.swift", source: "\(folder)/ (\(contractCount))", RegistryGenerator(set: set, history: history).render())
        add("Subscriptions.swift", source: "\(folder)/contracts.yaml", SubscriptionGenerator(set: set).renderConstructors())
        add("SchemaVersions.swift", source: "\(folder)/ (\(contractCount))", SchemaVersionsGenerator(set: set).render())
        add("ClientMigrations.swift", source: "\(folder)/ (\(contractCount))", MigrationsGenerator(set: set, history: history).render(side: .client))
        add("ServerMigrations.swift", source: "\(folder)/ (\(contractCount))", MigrationsGenerator(set: set, history: history).render(side: .server))
        add(
            "ServerPostgresMigrations.swift", source: "\(folder)/ (\(contractCount))",
            MigrationsGenerator(set: set, history: history).render(side: .serverPostgres)
        )
        for contract in set.contracts {
            let folder = contract.kind == .entity ? "Entities" : "Events"
            add("\(folder)/\(contract.swiftName).swift", source: contract.sourcePath, dto.render(contract))
        }
        return files.sorted { $0.path < $1.path }
    }

    /// The first line of every generated file starts with this; files without it are never deleted.
    public static let generatedHeaderPrefix = "// Generated by contractc"

    /// What writing the generated files changed.
    public struct WriteSummary: Hashable, Sendable {
        /// Files whose contents changed or are new.
        public var written: [String] = []
        /// Files already up to date, left untouched.
        public var unchanged: [String] = []
        /// Files no contract generates any more, deleted.
        public var removed: [String] = []
    }

    /// Errors writing the output folder.
    public enum WriteError: Error, CustomStringConvertible {
        case foreignFile(String)
        case io(path: String, underlying: String)

        /// What went wrong, with the path concerned.
        public var description: String {
            switch self {
            case .foreignFile(let path):
                return "\(path) was not generated by contractc; the output folder is owned by the generator. Move the file elsewhere."
            case .io(let path, let underlying):
                return "cannot write \(path): \(underlying)"
            }
        }
    }

    /// Writes `files` into `output`: only files whose content changed are touched, and
    /// generated files that are no longer produced are removed.
    public static func write(_ files: [GeneratedFile], to output: String) throws(WriteError) -> WriteSummary {
        let fileManager = FileManager.default
        var summary = WriteSummary()
        let wanted = Set(files.map(\.path))
        for existing in existingSwiftFiles(in: output) where !wanted.contains(existing) {
            let path = ContractLoader.join(output, existing)
            let head = (try? String(contentsOfFile: path, encoding: .utf8))?.prefix(generatedHeaderPrefix.count)
            guard head.map(String.init) == generatedHeaderPrefix else { throw .foreignFile(path) }
            do { try fileManager.removeItem(atPath: path) } catch { throw .io(path: path, underlying: "\(error)") }
            summary.removed.append(existing)
        }
        for file in files {
            let path = ContractLoader.join(output, file.path)
            let data = Data(file.contents.utf8)
            if let current = fileManager.contents(atPath: path), current == data {
                summary.unchanged.append(file.path)
                continue
            }
            do {
                let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
                try fileManager.createDirectory(atPath: folder, withIntermediateDirectories: true)
                try data.write(to: URL(fileURLWithPath: path), options: .atomic)
            } catch {
                throw .io(path: path, underlying: "\(error)")
            }
            summary.written.append(file.path)
        }
        removeEmptyFolders(in: output)
        return summary
    }

    /// The relative paths of generated files that differ from (or are missing in) `output`, and stale ones.
    public static func differences(_ files: [GeneratedFile], in output: String) -> [String] {
        var changed: [String] = []
        let wanted = Set(files.map(\.path))
        for file in files {
            let current = FileManager.default.contents(atPath: ContractLoader.join(output, file.path))
            if current != Data(file.contents.utf8) { changed.append(file.path) }
        }
        changed += existingSwiftFiles(in: output).filter { !wanted.contains($0) }
        return changed.sorted()
    }

    private static func existingSwiftFiles(in folder: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: folder) else { return [] }
        var paths: [String] = []
        while let relative = enumerator.nextObject() as? String {
            if relative.hasSuffix(".swift") { paths.append(relative) }
        }
        return paths.sorted()
    }

    private static func removeEmptyFolders(in folder: String) {
        let fileManager = FileManager.default
        guard let entries = try? fileManager.contentsOfDirectory(atPath: folder) else { return }
        for entry in entries {
            let path = ContractLoader.join(folder, entry)
            var isDirectory: ObjCBool = false
            guard fileManager.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { continue }
            removeEmptyFolders(in: path)
            if (try? fileManager.contentsOfDirectory(atPath: path))?.isEmpty == true {
                try? fileManager.removeItem(atPath: path)
            }
        }
    }
}

extension String {
    fileprivate func trimmingPrefix(_ prefix: Character) -> String {
        String(drop { $0 == prefix })
    }
}
