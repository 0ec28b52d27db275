import Foundation

/// The rollout gate of `contractc check --fleet`: for each contract whose `oldest_supported`
/// rises above its released value, how many active devices of a ``FleetCensus`` run a version
/// below the new floor. Once the raise ships, the server answers those devices `426` and they
/// purge the contract's rows, so a raise that refuses more than ``MaxCutoff`` of the active
/// devices is a `FLEET_CUTOFF_EXCEEDED` error at its `oldest_supported`.
public enum FleetGate {
    /// The largest share of the active devices one raise may refuse, in percent (`--max-cutoff`).
    public struct MaxCutoff: Hashable, Sendable, CustomStringConvertible {
        /// From 0 to 100, exactly as written (a `Double` would make 0.1 % of 3000 devices more than 3).
        let percent: Decimal

        /// 1 %, the default of `--max-cutoff`.
        public static let standard = MaxCutoff(exactly: 1)

        private init(exactly percent: Decimal) { self.percent = percent }

        /// Reads `1`, `0.5` or `1%`: a decimal number from 0 to 100, with or without `%`;
        /// nil for anything else.
        public init?(_ text: String) {
            var number = text.trimmingCharacters(in: .whitespaces)
            if number.hasSuffix("%") { number = String(number.dropLast()).trimmingCharacters(in: .whitespaces) }
            let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
            // Digits with an optional fraction only: Decimal(string:) alone would take `1e2` or `1abc`.
            guard (1...2).contains(parts.count), parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
                let percent = Decimal(string: number, locale: Locale(identifier: "en_US_POSIX")), percent <= 100
            else { return nil }
            self.percent = percent
        }

        /// `1 %`, `0.5 %`.
        public var description: String { "\(percent) %" }
    }

    /// A contract whose `oldest_supported` rises, and the active devices that refuses.
    public struct Raise: Hashable, Sendable {
        /// The contract's name, as the census keys it.
        public var contract: String
        /// The released `oldest_supported` (the lock's, or the compared revision's).
        public var from: Int
        /// The new `oldest_supported`.
        public var to: Int
        /// Where the new `oldest_supported` is written.
        public var location: SourceLocation
        /// Active devices per version below the new floor, for the versions the census has.
        public var refusedByVersion: [Int: Int]
        /// Every active device of the census.
        public var activeDevices: Int
        /// Whether the raise refuses more than the maximum share of the active devices.
        public var exceedsMaxCutoff: Bool

        /// The active devices that would be refused.
        public var refusedDevices: Int { refusedByVersion.values.reduce(0, +) }

        /// The refused share of the active devices in percent, rounded to two decimals (`0.73`);
        /// `0.00` without active devices.
        public var percentText: String {
            String(format: "%.2f", activeDevices == 0 ? 0 : Double(refusedDevices) * 100 / Double(activeDevices))
        }

        /// `Task: oldest_supported 1 → 2 refuses 3 of 412 active devices (0.73 %)`.
        public var summary: String {
            "\(contract): oldest_supported \(from) → \(to) refuses \(refusedDevices) of \(FleetGate.devices(activeDevices, "active")) (\(percentText) %)"
        }
    }

    /// What the gate found.
    public struct Report: Sendable {
        /// The census counted with.
        public var census: FleetCensus
        /// The maximum each raise was measured against.
        public var maxCutoff: MaxCutoff
        /// Every contract whose `oldest_supported` rises, by name.
        public var raises: [Raise]
        /// A `FLEET_CUTOFF_EXCEEDED` error for each raise above the maximum.
        public var diagnostics: DiagnosticCollector

        /// One line for each raise within the maximum, for the text report: `Task: oldest_supported
        /// 1 → 2 refuses 3 of 412 active devices (0.73 %), within --max-cutoff 1 %`.
        public var notes: [String] {
            raises.filter { !$0.exceedsMaxCutoff }.map { "\($0.summary), within --max-cutoff \(maxCutoff)" }
        }

        /// The report as one JSON object, for `--format json`: the census it counted with, the
        /// maximum, and every raise with its counts and location.
        public var json: String {
            func string(_ text: String?) -> String { text.map(DefaultParser.quote) ?? "null" }
            let raises = raises.map { raise in
                let versions = raise.refusedByVersion.keys.sorted().map { "\"\($0)\":\(raise.refusedByVersion[$0]!)" }
                let members = [
                    "\"contract\":" + string(raise.contract), "\"from\":\(raise.from)", "\"to\":\(raise.to)",
                    "\"refused_devices\":\(raise.refusedDevices)", "\"active_devices\":\(raise.activeDevices)",
                    "\"percent\":\(raise.percentText)", "\"exceeds_max_cutoff\":\(raise.exceedsMaxCutoff)",
                    "\"refused_by_version\":{" + versions.joined(separator: ",") + "}",
                    "\"file\":" + string(raise.location.file), "\"line\":\(raise.location.line)", "\"column\":\(raise.location.column)",
                ]
                return "{" + members.joined(separator: ",") + "}"
            }
            let members = [
                "\"tenant\":" + string(census.tenant), "\"generated_at\":" + string(census.generatedAt),
                "\"active_devices\":\(census.activeDevices)", "\"max_cutoff_percent\":\(maxCutoff.percent)",
                "\"raises\":[" + raises.joined(separator: ",") + "]",
            ]
            return "{" + members.joined(separator: ",") + "}"
        }
    }

    /// Counts, for each contract of `set` whose `oldest_supported` is above its released value,
    /// the active devices of `census` below the new value, and reports those above `maxCutoff`.
    /// - Parameters:
    ///   - set: the contracts as they are now.
    ///   - releasedOldestSupported: the baseline per contract name
    ///     (``ContractCompiler/ContractCompiler/CheckResult/releasedOldestSupported``); a contract without one is
    ///     not released, and no device runs it yet.
    ///   - census: the fleet's active devices, by contract and version.
    ///   - maxCutoff: the largest share of active devices a raise may cut off.
    public static func evaluate(
        _ set: ContractSet, releasedOldestSupported: [String: Int], census: FleetCensus, maxCutoff: MaxCutoff
    ) -> Report {
        var raises: [Raise] = []
        var diagnostics = DiagnosticCollector()
        for contract in set.contracts {
            guard let released = releasedOldestSupported[contract.name], contract.oldestSupported > released else { continue }
            let versions = census.activeDevicesByVersion[contract.name] ?? [:]
            let refused = versions.filter { $0.key < contract.oldestSupported }
            let refusedDevices = refused.values.reduce(0, +)
            // Exact decimal arithmetic: 1 of 100 devices is within 1 %, not above it by a rounding error.
            let exceeds = Decimal(refusedDevices) * 100 > maxCutoff.percent * Decimal(census.activeDevices)
            let raise = Raise(
                contract: contract.name, from: released, to: contract.oldestSupported,
                location: contract.oldestSupportedLocation ?? contract.versionLocation, refusedByVersion: refused,
                activeDevices: census.activeDevices, exceedsMaxCutoff: exceeds)
            raises.append(raise)
            guard exceeds else { continue }
            var notes = refused.keys.sorted().filter { refused[$0]! > 0 }.map {
                Diagnostic.Note("\(devices(refused[$0]!, "active")) \(refused[$0]! == 1 ? "runs" : "run") version \($0)")
            }
            notes.append(Diagnostic.Note("counted in the fleet census of \(censusDescription(census))"))
            diagnostics.error(
                .fleetCutoffExceeded, "\(raise.summary), above --max-cutoff \(maxCutoff)", at: raise.location,
                help:
                    "keep `oldest_supported: \(released)` until fewer devices run an older version, or pass a higher --max-cutoff for a deliberate cutoff (see `contractc explain FLEET_CUTOFF_EXCEEDED`)",
                notes: notes)
        }
        return Report(census: census, maxCutoff: maxCutoff, raises: raises, diagnostics: diagnostics)
    }

    /// `1 active device`, `412 active devices`.
    static func devices(_ count: Int, _ adjective: String) -> String {
        "\(count) \(adjective) device\(count == 1 ? "" : "s")"
    }

    /// `tenant acme, generated at 2026-11-27T08:00:00Z`, or `every tenant` when it covers them all.
    private static func censusDescription(_ census: FleetCensus) -> String {
        (census.tenant.map { "tenant \($0)" } ?? "every tenant") + (census.generatedAt.map { ", generated at \($0)" } ?? "")
    }
}
