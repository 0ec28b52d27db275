import ArgumentParser
import ContractRuntime
import Foundation
import SyncClient

struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "The device's data key: its version, and rotating it.",
        subcommands: [KeysStatusCommand.self, KeysRotateCommand.self],
        defaultSubcommand: KeysStatusCommand.self
    )
}

struct KeysStatusCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "The key version the device's sealed values are sealed with, and the key files it keeps."
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        // Opening the store finished any rotation a killed run left: this is the state after it.
        let status = session.store.dataKeyStatus()
        let versions = KeyFiles(session: session).versions()
        if output.json {
            Console.json(
                .object([
                    "version": .int(Int64(status.version)),
                    "rotating_from": status.rotatingFrom.map { .int(Int64($0)) } ?? .null,
                    "key_versions_kept": .array(versions.map { .int(Int64($0)) }),
                ]))
            return
        }
        Console.say("data key version \(status.version)" + (status.rotatingFrom.map { ", rotating from version \($0)" } ?? ""))
        Console.say("key versions kept: " + versions.map(String.init).joined(separator: ", "))
    }
}

struct KeysRotateCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate",
        abstract: "Rotates the data key: every sealed value is sealed again under a new key version, in batches.",
        discussion: """
            Each batch is one transaction. Killed part way, the device keeps every value readable with one \
            of the two key versions, and its next command finishes the rotation when it opens the store. \
            Once a rotation has ended, the key files of earlier versions are deleted (--keep-old-keys keeps them).
            """
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    @Option(help: "Rows sealed again per transaction.")
    var batchSize = 200

    @Flag(help: "Print a line after each batch (`batch N: M values sealed again`).")
    var progress = false

    @Flag(help: "Keep the key files of earlier versions.")
    var keepOldKeys = false

    func execute() async throws {
        guard batchSize > 0 else { throw DeviceFailure.usage("--batch-size must be at least 1") }
        let session = try device.session()
        let showsProgress = progress
        let report = try session.store.rotateDataKey(batchSize: batchSize) { report in
            if showsProgress { Console.say("batch \(report.batches): \(report.resealedValues) values sealed again") }
        }
        let files = KeyFiles(session: session)
        let deleted = keepOldKeys ? [] : try files.deleteVersions(before: report.toVersion)
        if output.json {
            Console.json(
                .object([
                    "from_version": .int(Int64(report.fromVersion)), "to_version": .int(Int64(report.toVersion)),
                    "resealed_values": .int(Int64(report.resealedValues)), "unreadable_values": .int(Int64(report.unreadableValues)),
                    "batches": .int(Int64(report.batches)), "deleted_key_versions": .array(deleted.map { .int(Int64($0)) }),
                ]))
            return
        }
        Console.say(
            "data key rotated from version \(report.fromVersion) to \(report.toVersion): "
                + "\(Wording.count(report.resealedValues, "value")) sealed again in \(Wording.count(report.batches, "batch", "batches"))"
                + (report.unreadableValues > 0 ? ", \(report.unreadableValues) unreadable before and left as they were" : ""))
        if !deleted.isEmpty { Console.say("deleted key versions " + deleted.map(String.init).joined(separator: ", ")) }
    }
}

/// The tenant key files of the device's folder, by version (`FileKeyProvider`'s layout).
private struct KeyFiles {
    let provider: FileKeyProvider
    let tenant: String

    init(session: DeviceSession) {
        provider = FileKeyProvider(directory: session.home.keysURL)
        tenant = session.profile.tenant
    }

    /// The versions with a key file, oldest first.
    func versions() -> [Int] { provider.versions(forTenant: tenant) }

    /// Deletes the key files of versions below `version`; returns the versions deleted.
    func deleteVersions(before version: Int) throws(DeviceFailure) -> [Int] {
        var deleted: [Int] = []
        for old in versions() where old < version {
            do {
                try provider.deleteKey(forTenant: tenant, version: old)
            } catch {
                throw DeviceFailure.failure("the rotation ended, but key version \(old) could not be deleted: \(error)")
            }
            deleted.append(old)
        }
        return deleted
    }
}
