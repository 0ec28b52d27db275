import ArgumentParser
import ContractCompiler
import Foundation

/// The rollout gate's flags of `contractc check`: where the fleet census comes from, and how
/// large a share of its active devices a raised `oldest_supported` may cut off.
struct FleetOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "A fleet census file (`sync-server fleet --export FILE`): fail when a raised oldest_supported would refuse more active devices than --max-cutoff.",
            valueName: "file"))
    var fleet: String?

    @Option(
        name: .customLong("fleet-url"),
        help: ArgumentHelp(
            "Fetch the fleet census instead, with a GET of this URL (a sync-server's /admin/v1/fleet?active=30d).", valueName: "url"))
    var fleetURL: String?

    @Option(
        name: .customLong("token-file"),
        help: ArgumentHelp("The file holding the admin token --fleet-url sends as `Authorization: Bearer`.", valueName: "file"))
    var tokenFile: String?

    @Option(
        name: .customLong("max-cutoff"),
        help: ArgumentHelp(
            "The largest share of the census's active devices one raise may refuse, in percent: 1, 0.5 or 1% (default: 1).",
            valueName: "percent"))
    var maxCutoffText: String?

    var maxCutoff: FleetGate.MaxCutoff { maxCutoffText.flatMap(FleetGate.MaxCutoff.init) ?? .standard }

    func validate() throws {
        if fleet != nil && fleetURL != nil {
            throw ValidationError("--fleet and --fleet-url both name a census; pass one of them")
        }
        if let fleetURL {
            guard let url = URL(string: fleetURL), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil
            else { throw ValidationError("--fleet-url takes an http or https URL; got '\(fleetURL)'") }
            guard tokenFile != nil else { throw ValidationError("--fleet-url needs --token-file, the file holding the admin token") }
        } else if tokenFile != nil {
            throw ValidationError("--token-file goes with --fleet-url")
        }
        if let maxCutoffText {
            guard fleet != nil || fleetURL != nil else { throw ValidationError("--max-cutoff goes with --fleet or --fleet-url") }
            guard FleetGate.MaxCutoff(maxCutoffText) != nil else {
                throw ValidationError("--max-cutoff takes a percentage from 0 to 100, such as 1, 0.5 or 1%; got '\(maxCutoffText)'")
            }
        }
    }

    /// The census the flags name, or nil without --fleet and --fleet-url. When it cannot be
    /// read, fetched or understood, says why on standard error and exits 2, before anything
    /// else is checked or printed.
    func census() throws -> FleetCensus? {
        let data: Data, source: String
        if let fleet {
            data = try Self.read(fleet, what: "the fleet census")
            source = "'\(fleet)'"
        } else if let fleetURL, let tokenFile, let url = URL(string: fleetURL) {
            let token = try Self.token(from: tokenFile)
            do {
                data = try CensusDownload.fetch(url, token: token)
            } catch {
                throw Self.fail("GET \(fleetURL) \(error.message)")
            }
            source = "from \(fleetURL)"
        } else {
            return nil
        }
        do {
            return try FleetCensus(json: data)
        } catch {
            throw Self.fail("the fleet census \(source) cannot be used: \(error.message)")
        }
    }

    /// The token, without the line end editors and `echo` leave behind.
    private static func token(from path: String) throws -> String {
        var token = String(decoding: try read(path, what: "the token file"), as: UTF8.self)
        while token.hasSuffix("\n") || token.hasSuffix("\r") { token.removeLast() }
        guard !token.isEmpty else { throw fail("the token file '\(path)' is empty") }
        return token
    }

    private static func read(_ path: String, what: String) throws -> Data {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { throw fail("\(what) '\(path)' does not exist") }
        guard !isFolder.boolValue else { throw fail("\(what) '\(path)' is a folder") }
        guard let data = FileManager.default.contents(atPath: path) else { throw fail("\(what) '\(path)' cannot be read") }
        return data
    }

    /// Prints `error: message` and gives the exit status of an input that cannot be read.
    private static func fail(_ message: String) -> ExitCode {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
        return ExitCode(2)
    }
}
