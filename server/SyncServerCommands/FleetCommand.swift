import ArgumentParser
import ContractRuntime
import Foundation
import SyncServer

/// `sync-server fleet`: the fleet census, per contract version and app version.
struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Summarise the devices the server has seen: per contract version and app version, active and stale.",
        discussion: """
            A device is active when seen within --active (30d by default). --export writes the census file \\
            `contractc check --fleet FILE` reads, to tell how many devices raising a contract's oldest_supported \\
            would cut off. Running servers write what they saw every few seconds: a device's last request may \\
            take that long to show.
            """
    )

    @OptionGroup var data: DataOptions
    @Option(help: "Only this tenant's devices (default: every tenant).") var tenant: String?
    @Option(help: ArgumentHelp("Seen within this window counts as active: 30d, 12h, 90m or seconds.", valueName: "WINDOW")) var active = "30d"
    @Flag(help: "Print the census as JSON (the census file) instead of tables.") var json = false
    @Flag(help: "List the devices too, the latest seen first (needs --tenant).") var devices = false
    @Option(help: ArgumentHelp("Write the census file here (JSON), for contractc check --fleet.", valueName: "FILE")) var export: String?

    func validate() throws {
        guard FleetSummary.window(active) != nil else { throw ValidationError("--active is a window like 30d, 12h, 90m or seconds, not '\(active)'") }
        if devices, tenant == nil { throw ValidationError("--devices lists one tenant's devices: give --tenant") }
        if tenant?.isEmpty == true { throw ValidationError("--tenant must not be empty") }
    }

    func run() async throws {
        let window = FleetSummary.window(active)!
        let storage = try await data.openStorage()
        let census = FleetCensus(storage: storage, clock: SystemClock())
        let now = Int64(Date().timeIntervalSince1970)
        let summary: FleetSummary
        var listed: [DeviceCensus] = []
        do {
            summary = try await census.summary(tenant: tenant, now: now, activeSeconds: window)
            if devices, let tenant { listed = try await census.devices(tenant: tenant, limit: 10_000) }
            await data.close(storage)
        } catch {
            await data.close(storage)
            throw fail("cannot read the fleet census: \(error)")
        }
        if let export {
            do {
                try Data(CanonicalJSON.bytes(summary.json) + [0x0A]).write(to: URL(fileURLWithPath: export), options: .atomic)
            } catch {
                throw fail("cannot write the census file \(export): \(error.localizedDescription)")
            }
        }
        if json {
            var object: [String: JSONValue] = [:]
            if case .object(let members) = summary.json { object = members }
            if devices { object["device_list"] = .array(listed.map(\.json)) }
            say(String(decoding: CanonicalJSON.bytes(.object(object)), as: UTF8.self))
            return
        }
        say(Self.text(summary))
        if devices {
            say("")
            say(
                Self.table(
                    ["user", "device", "last seen", "app", "last sync", "pushes", "pulls", "failures"],
                    listed.map { device in
                        [
                            device.userID, device.deviceID, Timestamp(millisecondsSince1970: device.lastSeenAt * 1000).description,
                            device.appVersion ?? "unknown",
                            "\(device.lastRoute) \(device.lastOutcome)", String(device.pushes), String(device.pulls), String(device.failures),
                        ]
                    }))
        }
        if let export { say("\nwrote the census file \(export)") }
    }

    static func text(_ summary: FleetSummary) -> String {
        var lines = [
            "fleet of \(summary.tenant.map { "tenant \($0)" } ?? "every tenant"): \(summary.devices.active) active, \(summary.devices.stale) stale"
                + " (active: seen within \(summary.activeWindowSeconds / 86_400 > 0 && summary.activeWindowSeconds % 86_400 == 0 ? "\(summary.activeWindowSeconds / 86_400)d" : "\(summary.activeWindowSeconds)s"))",
            "",
        ]
        var rows: [[String]] = []
        for contract in summary.contracts.keys.sorted() {
            for (version, counts) in summary.contracts[contract]!.sorted(by: { $0.key < $1.key }) {
                rows.append([contract, String(version), String(counts.active), String(counts.stale)])
            }
        }
        lines.append(table(["contract", "version", "active", "stale"], rows))
        lines.append("")
        lines.append(
            table(
                ["app version", "active", "stale"],
                summary.appVersions.sorted { $0.key < $1.key }.map { [$0.key, String($0.value.active), String($0.value.stale)] }))
        return lines.joined(separator: "\n")
    }

    /// Columns padded to their widest cell.
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        return ([header] + rows).map { row in
            row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces)
        }.joined(separator: "\n")
    }
}
