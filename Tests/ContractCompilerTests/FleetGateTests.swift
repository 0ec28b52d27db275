import Foundation
import OutpostTestSupport
import Testing

@testable import ContractCompiler

/// The rollout gate's computation (`FleetGate`) on contracts released with `ContractCompiler.lock`,
/// and the census file it reads (`FleetCensus`).
@Suite("Rollout gate: census and cutoff", .blockingWork)
struct FleetGateTests {
    /// `Item` released at versions 1 to `released` (`oldest_supported: 1`), then its next version
    /// with `oldest_supported: raisedTo`, checked against the lock.
    struct Raised {
        let workspace: CompatWorkspace
        let set: ContractSet
        let check: ContractCompiler.CheckResult

        init(released: Int = 1, raisedTo: Int) throws {
            workspace = try CompatWorkspace()
            for version in 1...released {
                try workspace.write(ContractText(version: version, fields: ["title: string?"]))
                try workspace.lock()
            }
            try workspace.write(ContractText(version: released + 1, fields: ["title: string?"], oldest: raisedTo))
            set = try workspace.loadValid()
            check = ContractCompiler.check(set, lockPath: workspace.lockPath)
            #expect(!check.diagnostics.hasErrors, "\(workspace.readable(check.diagnostics))")
        }

        func gate(_ census: FleetCensus, maxCutoff: String = "1") throws -> FleetGate.Report {
            FleetGate.evaluate(
                set, releasedOldestSupported: check.releasedOldestSupported, census: census,
                maxCutoff: try #require(FleetGate.MaxCutoff(maxCutoff)))
        }
    }

    static func census(active: Int, item: [Int: Int]?) -> FleetCensus {
        FleetCensus(activeDevices: active, activeDevicesByVersion: item.map { ["Item": $0] } ?? ["Other": [1: active]])
    }

    // MARK: The cutoff

    @Test("a raise within the maximum is a note, not an error")
    func withinMaximum() throws {
        let raised = try Raised(raisedTo: 2)
        defer { raised.workspace.remove() }
        let report = try raised.gate(Self.census(active: 412, item: [1: 3, 2: 409]))
        #expect(!report.diagnostics.hasErrors)
        let raise = try #require(report.raises.first)
        #expect(report.raises.count == 1)
        #expect((raise.contract, raise.from, raise.to, raise.refusedDevices, raise.activeDevices) == ("Item", 1, 2, 3, 412))
        #expect(!raise.exceedsMaxCutoff)
        #expect(report.notes == ["Item: oldest_supported 1 → 2 refuses 3 of 412 active devices (0.73 %), within --max-cutoff 1 %"])
    }

    @Test("a raise above the maximum is FLEET_CUTOFF_EXCEEDED, with the refused versions in notes")
    func aboveMaximum() throws {
        let raised = try Raised(raisedTo: 2)
        defer { raised.workspace.remove() }
        var census = Self.census(active: 412, item: [1: 9, 2: 403])
        census.tenant = "acme"
        census.generatedAt = "2026-11-27T08:00:00Z"
        let report = try raised.gate(census)
        #expect(report.notes.isEmpty)
        #expect(report.raises.map(\.exceedsMaxCutoff) == [true])
        let diagnostic = try #require(report.diagnostics.diagnostics.first)
        #expect(report.diagnostics.diagnostics.count == 1)
        #expect(diagnostic.severity == .error && diagnostic.rule == .fleetCutoffExceeded)
        #expect(diagnostic.message == "Item: oldest_supported 1 → 2 refuses 9 of 412 active devices (2.18 %), above --max-cutoff 1 %")
        #expect(
            diagnostic.notes.map(\.message) == [
                "9 active devices run version 1", "counted in the fleet census of tenant acme, generated at 2026-11-27T08:00:00Z",
            ])
        #expect(diagnostic.help?.hasPrefix("keep `oldest_supported: 1` until fewer devices run an older version") == true)
        #expect(RuleCatalog.explanation(for: diagnostic.rule) != nil)
    }

    @Test("exactly at the maximum passes; one device more fails; fractions compare exactly")
    func atMaximum() throws {
        let raised = try Raised(raisedTo: 2)
        defer { raised.workspace.remove() }
        #expect(try !raised.gate(Self.census(active: 100, item: [1: 1, 2: 99])).diagnostics.hasErrors)
        #expect(try raised.gate(Self.census(active: 100, item: [1: 2, 2: 98])).diagnostics.hasErrors)
        // 0.5 % of 1000 is 5 devices; 0.1 is no binary fraction, the comparison must not round.
        #expect(try !raised.gate(Self.census(active: 1000, item: [1: 5]), maxCutoff: "0.5").diagnostics.hasErrors)
        #expect(try raised.gate(Self.census(active: 1000, item: [1: 6]), maxCutoff: "0.5").diagnostics.hasErrors)
        #expect(try !raised.gate(Self.census(active: 3000, item: [1: 3]), maxCutoff: "0.1").diagnostics.hasErrors)
        #expect(try raised.gate(Self.census(active: 3000, item: [1: 4]), maxCutoff: "0.1").diagnostics.hasErrors)
        // --max-cutoff 0: no device may be cut off.
        #expect(try !raised.gate(Self.census(active: 10, item: [2: 10]), maxCutoff: "0").diagnostics.hasErrors)
        #expect(try raised.gate(Self.census(active: 10, item: [1: 1, 2: 9]), maxCutoff: "0").diagnostics.hasErrors)
    }

    @Test("every version below the new floor counts, none at or above it")
    func severalVersions() throws {
        let raised = try Raised(released: 3, raisedTo: 3)
        defer { raised.workspace.remove() }
        let report = try raised.gate(Self.census(active: 100, item: [1: 2, 2: 3, 3: 50, 4: 45]))
        let raise = try #require(report.raises.first)
        #expect((raise.from, raise.to) == (1, 3))
        #expect(raise.refusedByVersion == [1: 2, 2: 3])
        #expect(raise.refusedDevices == 5)
        let diagnostic = try #require(report.diagnostics.diagnostics.first)
        #expect(diagnostic.notes.map(\.message).prefix(2) == ["2 active devices run version 1", "3 active devices run version 2"])
        #expect(diagnostic.notes.last?.message == "counted in the fleet census of every tenant")
    }

    @Test("a contract the census does not have refuses no device")
    func contractAbsentFromCensus() throws {
        let raised = try Raised(raisedTo: 2)
        defer { raised.workspace.remove() }
        let report = try raised.gate(Self.census(active: 412, item: nil))
        #expect(!report.diagnostics.hasErrors)
        #expect(report.notes == ["Item: oldest_supported 1 → 2 refuses 0 of 412 active devices (0.00 %), within --max-cutoff 1 %"])
    }

    @Test("a census without active devices refuses none and passes")
    func zeroActiveDevices() throws {
        let raised = try Raised(raisedTo: 2)
        defer { raised.workspace.remove() }
        let report = try raised.gate(FleetCensus(activeDevices: 0, activeDevicesByVersion: ["Item": [1: 0]]), maxCutoff: "0")
        #expect(!report.diagnostics.hasErrors)
        #expect(report.notes == ["Item: oldest_supported 1 → 2 refuses 0 of 0 active devices (0.00 %), within --max-cutoff 0 %"])
    }

    @Test("stale devices are not counted, on any side of the ratio")
    func staleIgnored() throws {
        let raised = try Raised(raisedTo: 2)
        defer { raised.workspace.remove() }
        let census = try FleetCensus(
            json: Data(
                """
                {"format": "outpost.fleet-census", "format_version": 1, "devices": {"active": 200, "stale": 5000},
                 "contracts": {"Item": {"1": {"active": 2, "stale": 4000}, "2": {"active": 198, "stale": 1000}}}}
                """.utf8))
        let report = try raised.gate(census)
        #expect(!report.diagnostics.hasErrors)
        #expect(report.notes == ["Item: oldest_supported 1 → 2 refuses 2 of 200 active devices (1.00 %), within --max-cutoff 1 %"])
    }

    @Test("a contract whose oldest_supported does not rise, or that is not released, is not reported")
    func noRaise() throws {
        let workspace = try CompatWorkspace()
        defer { workspace.remove() }
        try workspace.write(ContractText(version: 1, fields: ["title: string?"], oldest: 1))
        try workspace.lock()
        try workspace.write(ContractText(version: 2, fields: ["title: string?"], oldest: 1))
        // Not released: its floor is measured from nothing, and no device runs it yet.
        try workspace.write(ContractText(kind: .event, version: 2, fields: ["note: string?"], oldest: 2))
        let set = try workspace.loadValid()
        let check = ContractCompiler.check(set, lockPath: workspace.lockPath)
        #expect(check.releasedOldestSupported == ["Item": 1])
        let report = FleetGate.evaluate(
            set, releasedOldestSupported: check.releasedOldestSupported,
            census: FleetCensus(activeDevices: 10, activeDevicesByVersion: ["Item": [1: 10], "ItemLogged": [1: 10]]), maxCutoff: .standard)
        #expect(report.raises.isEmpty && report.notes.isEmpty && !report.diagnostics.hasErrors)
    }

    @Test("check --against measures a raise from the other revision's oldest_supported")
    func againstBaseline() throws {
        let previous = try CompatWorkspace()
        defer { previous.remove() }
        try previous.write(ContractText(version: 2, fields: ["title: string?"], oldest: 2))
        let current = try CompatWorkspace()
        defer { current.remove() }
        try current.write(ContractText(version: 3, fields: ["title: string?"], oldest: 3))
        let set = try current.loadValid()
        let check = ContractCompiler.check(set, against: try previous.loadValid())
        #expect(check.releasedOldestSupported == ["Item": 2])
        let report = FleetGate.evaluate(
            set, releasedOldestSupported: check.releasedOldestSupported,
            census: FleetCensus(activeDevices: 100, activeDevicesByVersion: ["Item": [1: 50, 2: 30, 3: 20]]), maxCutoff: .standard)
        #expect(report.raises.map(\.refusedByVersion) == [[1: 50, 2: 30]])
        #expect(report.diagnostics.errorCount == 1)
    }

    @Test("FLEET_CUTOFF_EXCEEDED is located at the value of oldest_supported in the contract's file")
    func diagnosticLocation() throws {
        let raised = try Raised(raisedTo: 2)
        defer { raised.workspace.remove() }
        let diagnostic = try #require(try raised.gate(Self.census(active: 10, item: [1: 5, 2: 5])).diagnostics.diagnostics.first)
        let file = raised.workspace.path("entities/item.yaml")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        let line = try #require(lineNumber(of: "oldest_supported:", in: text))
        #expect(diagnostic.location == SourceLocation(file: file, line: line, column: "oldest_supported: ".count + 1))
        #expect(text.components(separatedBy: "\n")[line - 1] == "oldest_supported: 2")
    }

    @Test("the JSON report names the census, the maximum and every raise")
    func jsonReport() throws {
        let raised = try Raised(raisedTo: 2)
        defer { raised.workspace.remove() }
        var census = Self.census(active: 412, item: [1: 3, 2: 409])
        census.tenant = "acme"
        let report = try raised.gate(census, maxCutoff: "0.5%")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(report.json.utf8)) as? [String: Any], "\(report.json)")
        #expect(document["tenant"] as? String == "acme")
        #expect(document["generated_at"] is NSNull)
        #expect(document["active_devices"] as? Int == 412)
        #expect(document["max_cutoff_percent"] as? Double == 0.5)
        let raise = try #require((document["raises"] as? [[String: Any]])?.first)
        #expect(raise["contract"] as? String == "Item")
        #expect(raise["from"] as? Int == 1 && raise["to"] as? Int == 2)
        #expect(raise["refused_devices"] as? Int == 3 && raise["active_devices"] as? Int == 412)
        #expect(raise["percent"] as? Double == 0.73)
        #expect(raise["exceeds_max_cutoff"] as? Bool == true)
        #expect((raise["refused_by_version"] as? [String: Int]) == ["1": 3])
        #expect(raise["file"] as? String == raised.workspace.path("entities/item.yaml"))
        #expect(raise["line"] as? Int == 4 && raise["column"] as? Int == 19)
    }

    // MARK: --max-cutoff

    @Test("--max-cutoff takes a percentage from 0 to 100, with or without %")
    func maxCutoffParsing() {
        for (text, shown) in [("1", "1 %"), ("0.5", "0.5 %"), ("1%", "1 %"), ("2.5 %", "2.5 %"), ("0", "0 %"), ("100", "100 %"), ("1.0", "1 %")] {
            #expect(FleetGate.MaxCutoff(text)?.description == shown, "\(text)")
        }
        for text in ["", "%", "abc", "-1", "100.5", "1e2", "0x1", ".5", "1.", "1,5", "１", "1%%"] {
            #expect(FleetGate.MaxCutoff(text) == nil, "\(text)")
        }
        #expect(FleetGate.MaxCutoff.standard == FleetGate.MaxCutoff("1"))
    }

    // MARK: The census file

    static let sample = """
        {
          "format": "outpost.fleet-census",
          "format_version": 1,
          "generated_at": "2026-11-27T08:00:00Z",
          "tenant": "acme",
          "active_window_seconds": 2592000,
          "devices": {"active": 412, "stale": 30},
          "contracts": {
            "Task": {"1": {"active": 3, "stale": 10}, "2": {"active": 409, "stale": 20}},
            "Incident": {"2": {"active": 412, "stale": 30}}
          },
          "app_versions": {"1.4.0": {"active": 3, "stale": 10}, "unknown": {"active": 0, "stale": 1}}
        }
        """

    @Test("the documented census reads as written")
    func sampleCensus() throws {
        let census = try FleetCensus(json: Data(Self.sample.utf8))
        #expect(
            census
                == FleetCensus(
                    activeDevices: 412, activeDevicesByVersion: ["Task": [1: 3, 2: 409], "Incident": [2: 412]], tenant: "acme",
                    generatedAt: "2026-11-27T08:00:00Z", activeWindowSeconds: 2_592_000))
    }

    @Test("a census of every tenant (tenant absent or null), and members a later format adds, read as well")
    func forwardCompatible() throws {
        for tenant in ["", "\"tenant\": null,"] {
            let text = """
                {"format": "outpost.fleet-census", "format_version": 1, \(tenant) "devices": {"active": 2, "retired": 9},
                 "contracts": {"Task": {"3": {"active": 2, "first_seen": "2026-01-01"}}}, "regions": ["eu"], "next": {"a": [1, {}]}}
                """
            let census = try FleetCensus(json: Data(text.utf8))
            #expect(census.tenant == nil && census.generatedAt == nil && census.activeWindowSeconds == nil)
            #expect(census.activeDevices == 2 && census.activeDevicesByVersion == ["Task": [3: 2]])
        }
    }

    static let head = #""format": "outpost.fleet-census", "format_version": 1"#

    static let malformed: [(json: String, message: String)] = [
        ("", "not valid JSON"),
        ("{\"format\": ", "not valid JSON"),
        ("[1, 2]", "the document is not a JSON object"),
        ("{\"format_version\": 1, \"devices\": {\"active\": 1}, \"contracts\": {}}", "missing `format` (\"outpost.fleet-census\")"),
        ("{\"format\": \"outpost.contracts-lock\", \"format_version\": 1}", "`format` is \"outpost.contracts-lock\", not \"outpost.fleet-census\""),
        ("{\"format\": 7}", "`format` is not a string"),
        ("{\"format\": \"outpost.fleet-census\", \"devices\": {\"active\": 1}, \"contracts\": {}}", "missing `format_version`"),
        ("{\"format\": \"outpost.fleet-census\", \"format_version\": 2}", "unsupported `format_version` 2: this contractc reads version 1"),
        ("{\"format\": \"outpost.fleet-census\", \"format_version\": \"1\"}", "`format_version` is not a whole number"),
        ("{\(head), \"contracts\": {}}", "missing `devices`"),
        ("{\(head), \"devices\": {\"stale\": 3}, \"contracts\": {}}", "missing `devices.active`"),
        ("{\(head), \"devices\": {\"active\": null}, \"contracts\": {}}", "`devices.active` is null, not a whole number"),
        ("{\(head), \"devices\": {\"active\": 1.5}, \"contracts\": {}}", "`devices.active` is not a whole number"),
        ("{\(head), \"devices\": {\"active\": -1}, \"contracts\": {}}", "`devices.active` is negative"),
        ("{\(head), \"devices\": {\"active\": 1}}", "missing `contracts`"),
        ("{\(head), \"devices\": {\"active\": 1}, \"contracts\": []}", "`contracts` is not an object"),
        ("{\(head), \"devices\": {\"active\": 1}, \"contracts\": {\"Task\": {\"1\": {}}}}", "missing `contracts.Task.1.active`"),
        (
            "{\(head), \"devices\": {\"active\": 1}, \"contracts\": {\"Task\": {\"1\": {\"active\": \"1\"}}}}",
            "`contracts.Task.1.active` is not a whole number"
        ),
        ("{\(head), \"devices\": {\"active\": 1}, \"contracts\": {\"Task\": {\"1\": {\"active\": -1}}}}", "`contracts.Task.1.active` is negative"),
        (
            "{\(head), \"devices\": {\"active\": 1}, \"contracts\": {\"Task\": {\"v1\": {\"active\": 1}}}}",
            "`contracts.Task` has the version key \"v1\", which is not a whole number"
        ),
        (
            "{\(head), \"devices\": {\"active\": 3}, \"contracts\": {\"Task\": {\"1\": {\"active\": 2}, \"2\": {\"active\": 2}}}}",
            "`contracts.Task` counts 4 active devices, more than `devices.active` (3)"
        ),
        ("{\(head), \"tenant\": 5, \"devices\": {\"active\": 1}, \"contracts\": {}}", "`tenant` is not a string"),
    ]

    @Test("a malformed census is refused with what is wrong and where", arguments: malformed.indices)
    func malformedCensus(_ index: Int) {
        let (json, message) = Self.malformed[index]
        #expect(throws: FleetCensus.ReadError(message), "\(json)") { try FleetCensus(json: Data(json.utf8)) }
    }

    // MARK: The rule

    @Test("FLEET_CUTOFF_EXCEEDED is explained, and no allowance may name it")
    func rule() {
        let explanation = RuleCatalog.explanation(for: .fleetCutoffExceeded)
        #expect(explanation?.scope == .fleet)
        #expect(explanation?.rendered.contains("Applies to: `contractc check --fleet` and `--fleet-url`") == true)
        #expect(RuleCatalog.allRules.contains(.fleetCutoffExceeded))
        #expect(!RuleCatalog.allowableRules.contains(.fleetCutoffExceeded))
    }
}
