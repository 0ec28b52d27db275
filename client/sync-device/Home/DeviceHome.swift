import Foundation

/// One device's folder: everything the device keeps lives here, so one folder is one device.
///
/// ```
/// device.json        the login: server, token, tenant, user, device, teams, scopes
/// outpost.sqlite     the offline store (with its -wal and -shm files)
/// assets/            downloaded files
/// keys/              the tenant's encryption key (mode 0600)
/// offline            present while the network is switched off (`offline on`)
/// ```
struct DeviceHome {
    /// The environment variable naming the home folder when `--home` is not given.
    static let environmentVariable = "OUTPOST_HOME"

    let url: URL

    var profileURL: URL { url.appendingPathComponent("device.json") }
    var databaseURL: URL { url.appendingPathComponent("outpost.sqlite") }
    /// Where builds before `file` fields kept downloaded asset files; deleted when the store opens.
    var legacyAssetsURL: URL { url.appendingPathComponent("assets", isDirectory: true) }
    var keysURL: URL { url.appendingPathComponent("keys", isDirectory: true) }
    var offlineFlagURL: URL { url.appendingPathComponent("offline") }

    // MARK: Login

    /// The stored login.
    /// - Throws: a bad-state failure naming `login` when the device never logged in.
    func profile() throws(DeviceFailure) -> DeviceProfile {
        guard let data = try? Data(contentsOf: profileURL) else {
            throw .badState(
                "not logged in: \(url.path) holds no device",
                hint: "run `sync-device login --home \(url.path) --server URL --token TOKEN` first"
            )
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(DeviceProfile.self, from: data)
        } catch {
            throw .failure("\(profileURL.path) cannot be read (\(error)); log in again")
        }
    }

    /// Whether a login is stored.
    var hasProfile: Bool { FileManager.default.fileExists(atPath: profileURL.path) }

    /// Stores the login, readable by the owner only (it holds the token).
    func save(_ profile: DeviceProfile) throws(DeviceFailure) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            try encoder.encode(profile).write(to: profileURL, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: profileURL.path)
        } catch {
            throw .failure("cannot write \(profileURL.path): \(error.localizedDescription)")
        }
    }

    /// Removes the login and the offline flag (the store removes its own files).
    func forget() throws(DeviceFailure) {
        for file in [profileURL, offlineFlagURL, meteredFlagURL, keysURL] where FileManager.default.fileExists(atPath: file.path) {
            do {
                try FileManager.default.removeItem(at: file)
            } catch {
                throw .failure("cannot remove \(file.path): \(error.localizedDescription)")
            }
        }
    }

    // MARK: Simulated network loss

    /// Whether this device's network costs (cellular, a hotspot), as `preferences --network`
    /// set it: where an app has a path monitor that tells, a command line has the user.
    var isMetered: Bool { FileManager.default.fileExists(atPath: meteredFlagURL.path) }

    private var meteredFlagURL: URL { offlineFlagURL.deletingLastPathComponent().appendingPathComponent("metered") }

    func setMetered(_ metered: Bool) throws(DeviceFailure) {
        do {
            if metered {
                try Data("the network of this device is metered; `sync-device preferences --network unmetered` changes it\n".utf8)
                    .write(to: meteredFlagURL, options: .atomic)
            } else if isMetered {
                try FileManager.default.removeItem(at: meteredFlagURL)
            }
        } catch {
            throw .failure("cannot change \(meteredFlagURL.path): \(error.localizedDescription)")
        }
    }

    /// Whether the network is switched off (`offline on`); read on every request, so switching
    /// it from another shell affects a sync already running.
    var isOffline: Bool { FileManager.default.fileExists(atPath: offlineFlagURL.path) }

    func setOffline(_ offline: Bool) throws(DeviceFailure) {
        do {
            if offline {
                try Data("the network of this device is switched off; `sync-device offline off` switches it on\n".utf8)
                    .write(to: offlineFlagURL, options: .atomic)
            } else if isOffline {
                try FileManager.default.removeItem(at: offlineFlagURL)
            }
        } catch {
            throw .failure("cannot change \(offlineFlagURL.path): \(error.localizedDescription)")
        }
    }
}
