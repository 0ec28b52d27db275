import ArgumentParser
import ContractRuntime
import Foundation
import SyncServer

/// `sync-server sinks`: where applied changes are delivered (webhooks, a learning record store).
struct SinksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sinks",
        abstract: "Add, list and remove the sinks applied changes are delivered to; inspect and replay their dead letters.",
        discussion: """
            A running server delivers each sink from the change feed: batches of JSON changes signed \
            with Outpost-Signature (webhook), or in the form of a kind an app adds (the learning app's \
            xapi: xAPI statements to a learning record store); \
            retried with backoff on 5xx, timeouts and connection errors; a 4xx parks the batch as a \
            dead letter. Guide: docs/integration.md.
            """,
        subcommands: [Add.self, List.self, Remove.self, DeadLetters.self, Replay.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a sink; it delivers what is applied from now on (or, with --from-start, every change kept).")
        @OptionGroup var data: DataOptions
        @Option(help: "The tenant whose changes it delivers.") var tenant: String
        @Option(help: "The receiver's URL (its kind may post under it: an xapi sink posts to <url>/statements).") var url: String
        @Option(help: "A file holding the signing secret (HMAC-SHA256 of Outpost-Signature), at least 16 bytes.") var secretFile: String
        @Option(help: "The sink's id (letters, digits, _ and -); made up when left out.") var id: String?
        @Option(help: "webhook (JSON batches of changes), or a kind one of the server's apps adds (xapi: xAPI 1.0.3 statements).")
        var kind = "webhook"
        @Option(help: "Comma-separated contracts to deliver (all when left out).") var contracts: String?
        @Flag(help: "Deliver every change the feed keeps, not only those applied from now on.") var fromStart = false
        @Option(
            name: .customLong("setting"),
            help: ArgumentHelp(
                "A setting of the sink's kind (xapi: user, home_page, contract, activity_base); repeat for several.", valueName: "NAME=VALUE"))
        var settings: [String] = []
        @Option(
            name: .customLong("setting-file"),
            help: ArgumentHelp(
                "A setting read from a file, for a secret one (xapi: password=FILE), kept out of the command line.", valueName: "NAME=FILE"))
        var settingFiles: [String] = []
        @Option(
            name: .customLong("outbound-allow"),
            help: ArgumentHelp(
                "Let the sink's URL be at this address or CIDR block although it is loopback, private or link-local (serve needs the same --outbound-allow to deliver it); repeat for several.",
                valueName: "CIDR"))
        var outboundAllow: [String] = []

        func run() async throws {
            var request = SinkAdministration.Request(url: url, secret: try readSecret(secretFile, what: "secret"))
            request.id = id
            request.kind = kind
            request.contracts = contracts.map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
            request.fromStart = fromStart
            for (flag, pairs) in [("--setting", settings), ("--setting-file", settingFiles)] {
                for pair in pairs {
                    guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                        throw ValidationError("\(flag) takes NAME=\(flag == "--setting" ? "VALUE" : "FILE"), not \(pair)")
                    }
                    let name = String(pair[..<equals])
                    let value = String(pair[pair.index(after: equals)...])
                    guard request.settings[name] == nil else { throw ValidationError("the setting \(name) is given twice") }
                    request.settings[name] = flag == "--setting" ? value : try readSecret(value, what: "setting \(name)")
                }
            }
            let (asked, tenant) = (request, tenant)
            let sink = try await withAdministration(data, outboundAllow: outboundAllow) { try await $0.add(asked, tenant: tenant) }
            say("added sink \(sink.id) (\(sink.kind)) of \(tenant) → \(sink.url), from \(sink.cursor.text)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a tenant's sinks, one JSON object per line (secrets never shown).")
        @OptionGroup var data: DataOptions
        @Option(help: "The tenant.") var tenant: String

        func run() async throws {
            let sinks = try await withAdministration(data) { try await $0.sinks(tenant: tenant) }
            for sink in sinks { say(String(decoding: CanonicalJSON.bytes(sink.json), as: UTF8.self)) }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a sink and its dead letters.")
        @OptionGroup var data: DataOptions
        @Option(help: "The tenant.") var tenant: String
        @Option(help: "The sink's id.") var id: String

        func run() async throws {
            try await withAdministration(data) { try await $0.remove(tenant: tenant, id: id) }
            say("removed sink \(id) of \(tenant)")
        }
    }

    struct DeadLetters: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dead-letters", abstract: "Print a sink's dead letters (batches its receiver refused), one JSON object per line.")
        @OptionGroup var data: DataOptions
        @Option(help: "The tenant.") var tenant: String
        @Option(help: "The sink's id.") var sink: String
        @Flag(help: "Print each letter's body as it was sent.") var bodies = false

        func run() async throws {
            let letters = try await withAdministration(data) { administration in
                var all: [DeadLetter] = []
                while true {
                    let page = try await administration.deadLetters(tenant: tenant, sinkID: sink, after: all.last?.id ?? 0, limit: 1000)
                    all += page
                    if page.count < 1000 { return all }
                }
            }
            for letter in letters {
                var json = letter.json
                if bodies, case .object(var object) = json {
                    object["body"] = .string(letter.body)
                    json = .object(object)
                }
                say(String(decoding: CanonicalJSON.bytes(json), as: UTF8.self))
            }
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a sink's dead letters again (same body and idempotency key); delivered ones are removed.")
        @OptionGroup var data: DataOptions
        @Option(help: "The tenant.") var tenant: String
        @Option(help: "The sink's id.") var sink: String
        @Option(name: .customLong("dead-letter"), help: "A dead letter's id (repeat it); every one when left out.") var ids: [Int64] = []
        @Option(
            name: .customLong("outbound-allow"),
            help: ArgumentHelp(
                "Let the replay reach this address or CIDR block although it is loopback, private or link-local; repeat for several.",
                valueName: "CIDR"))
        var outboundAllow: [String] = []

        func run() async throws {
            let replays = try await withAdministration(data, outboundAllow: outboundAllow) {
                try await $0.replay(tenant: tenant, sinkID: sink, ids: ids.isEmpty ? nil : ids)
            }
            for replay in replays { say(String(decoding: CanonicalJSON.bytes(replay.json), as: UTF8.self)) }
            let failed = replays.filter {
                if case .delivered = $0.outcome { return false }
                return true
            }
            if !failed.isEmpty { throw fail("\(failed.count) of \(replays.count) dead letter(s) were not delivered; they are kept") }
        }
    }
}

/// Runs `work` on the data folder's storage, closing it after; a refusal becomes its message.
private func withAdministration<T: Sendable>(
    _ data: DataOptions, outboundAllow: [String] = [], _ work: @escaping @Sendable (SinkAdministration) async throws -> T
) async throws -> T {
    var allowList: [CIDRBlock] = []
    for text in outboundAllow {
        guard let block = CIDRBlock(text) else {
            throw ValidationError("--outbound-allow takes an address or a CIDR block like 10.0.0.0/8 or fd00::/8, not \(text)")
        }
        allowList.append(block)
    }
    let storage = try await data.openStorage()
    do {
        let administration = SinkAdministration(
            storage: storage, outbound: OutboundAddressPolicy(allowList: allowList), kinds: SinkKinds(apps: SyncServerCommands.program.apps))
        let result = try await work(administration)
        await data.close(storage)
        return result
    } catch let error as ServiceError {
        await data.close(storage)
        throw fail(error.detail.message)
    } catch {
        await data.close(storage)
        throw fail("\(error)")
    }
}

private func readSecret(_ path: String, what: String) throws -> String {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw fail("cannot read the \(what) file \(path)") }
    return text.trimmingCharacters(in: .newlines)
}
