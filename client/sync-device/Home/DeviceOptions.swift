import ArgumentParser
import Foundation

/// The options every command takes: which device (its home folder) and, hidden, its clock.
struct DeviceOptions: ParsableArguments {
    @Option(
        name: .customLong("home"),
        help: ArgumentHelp("The device's folder (database, keys, files). Default: $\(DeviceHome.environmentVariable).", valueName: "DIR")
    )
    var home: String?

    /// Shifts the device's clock (`+15d`, or an ISO-8601 time); for tests and demos.
    @Option(name: .customLong("now"), help: .hidden)
    var now: String?

    /// The home folder named by `--home` or `$OUTPOST_HOME`.
    func deviceHome() throws(DeviceFailure) -> DeviceHome {
        guard let path = home ?? ProcessInfo.processInfo.environment[DeviceHome.environmentVariable], !path.isEmpty else {
            throw .usage(
                "no device home: pass --home DIR or set \(DeviceHome.environmentVariable)",
                hint: "one folder is one device; use a new folder for a new device"
            )
        }
        return DeviceHome(url: URL(fileURLWithPath: (path as NSString).expandingTildeInPath, isDirectory: true).standardizedFileURL)
    }

    func clock() throws(DeviceFailure) -> ShiftedClock {
        try ShiftedClock.resolve(option: now)
    }

    /// The logged-in device, with its store open.
    func session() throws(DeviceFailure) -> DeviceSession {
        try DeviceSession(home: deviceHome(), clock: clock())
    }
}

/// `--json` of the read commands.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print JSON (a stable shape, keys sorted) instead of text.")
    var json = false
}
