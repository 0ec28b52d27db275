import Foundation

/// Finds and reads the contract files of a folder: the manifest `contracts.yaml` and every
/// other `.yaml`/`.yml` file below it, in path order.
public struct ContractLoader: Sendable {
    /// The manifest's file name at the root of a contracts folder.
    public static let manifestName = "contracts.yaml"

    /// The YAML parser every file goes through, with its limits.
    public var parser = YAMLParser()

    /// A loader with the default parser limits.
    public init() {}

    /// One contract file, read but not yet parsed.
    public struct SourceFile: Sendable {
        /// The path shown in diagnostics: the folder as given, joined with the file's relative path.
        public var displayPath: String
        /// The file's contents, as read.
        public var bytes: [UInt8]

        package init(displayPath: String, bytes: [UInt8]) {
            self.displayPath = displayPath
            self.bytes = bytes
        }
    }

    /// The manifest and the contract files (sorted by path), or diagnostics if the folder is unusable.
    public func sources(in directory: String, diagnostics: inout DiagnosticCollector) -> (manifest: SourceFile?, contracts: [SourceFile]) {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        let manifestPath = Self.join(directory, Self.manifestName)
        guard fileManager.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            diagnostics.error(
                .missingManifest, "contracts folder '\(directory)' does not exist", at: .startOf(manifestPath),
                help: "run from the project root, or pass `--contracts DIR`"
            )
            return (nil, [])
        }
        var manifest: SourceFile?
        if let bytes = read(manifestPath, diagnostics: &diagnostics) {
            manifest = SourceFile(displayPath: manifestPath, bytes: bytes)
        }
        var relativePaths: [String] = []
        if let enumerator = fileManager.enumerator(atPath: directory) {
            while let relative = enumerator.nextObject() as? String {
                guard relative.hasSuffix(".yaml") || relative.hasSuffix(".yml") else { continue }
                guard relative != Self.manifestName else { continue }
                relativePaths.append(relative)
            }
        }
        var contracts: [SourceFile] = []
        for relative in relativePaths.sorted() {
            let path = Self.join(directory, relative)
            var isDirectory: ObjCBool = false
            guard fileManager.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            if let bytes = read(path, diagnostics: &diagnostics) {
                contracts.append(SourceFile(displayPath: path, bytes: bytes))
            }
        }
        return (manifest, contracts)
    }

    private func read(_ path: String, diagnostics: inout DiagnosticCollector) -> [UInt8]? {
        guard FileManager.default.fileExists(atPath: path) else {
            if path.hasSuffix(Self.manifestName) {
                diagnostics.error(
                    .missingManifest, "the manifest \(path) is missing", at: .startOf(path),
                    help: "create it with the project's scopes, for example `scopes: { user: { key: \"progress:user:{user_id}\" } }`"
                )
            }
            return nil
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            diagnostics.error(.fileUnreadable, "cannot read \(path)", at: .startOf(path), help: "check the file's permissions")
            return nil
        }
        defer { try? handle.close() }
        // Read one byte past the limit so the parser can refuse an oversized file without loading all of it.
        let data = (try? handle.read(upToCount: parser.maximumFileSize + 1)) ?? Data()
        return [UInt8](data)
    }

    static func join(_ directory: String, _ relative: String) -> String {
        if directory.isEmpty || directory == "." { return relative }
        return directory.hasSuffix("/") ? directory + relative : directory + "/" + relative
    }
}
