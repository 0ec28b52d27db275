import ArgumentParser
import Foundation
import LearningClient
import SyncClient

/// The exit codes of every command, as `sync-device --help` lists them.
enum DeviceExit {
    /// The device itself failed: its database or its files.
    static let failure = ExitCode(1)
    /// Not logged in, or the home folder is in a state that does not allow the command.
    static let badState = ExitCode(2)
    /// The network or the server failed: offline, unreachable, or the request was refused.
    static let network = ExitCode(3)
    /// A sync finished, but conflicts or refused writes wait for the user.
    static let needsAttention = ExitCode(4)
    /// Writes are paused until a sync succeeds (unsynced changes older than 14 days).
    static let readOnly = ExitCode(5)
    /// No such unit, lesson, assessment, question, row, conflict or queued change.
    static let notFound = ExitCode(6)
    /// A file refused for a `file` field before anything was queued: larger than the field
    /// allows, of a content type it does not accept, or bytes not of the type declared.
    static let fileRefused = ExitCode(7)
    /// A file to attach that cannot be read (sysexits' `EX_NOINPUT`).
    static let noInput = ExitCode(66)
    /// An unknown flag, entity or field, a value that does not fit, a missing required field, or a
    /// write the contract does not let devices make (ArgumentParser's own code).
    static let usage = ExitCode.validationFailure
}

/// A failure a command reports as `error: …` (and `help: …`) on standard error, with its exit
/// code.
struct DeviceFailure: Error {
    var message: String
    var hint: String?
    var exitCode: ExitCode

    init(message: String, hint: String? = nil, exitCode: ExitCode) {
        self.message = message
        self.hint = hint
        self.exitCode = exitCode
    }

    static func usage(_ message: String, hint: String? = nil) -> Self { Self(message: message, hint: hint, exitCode: DeviceExit.usage) }
    static func badState(_ message: String, hint: String? = nil) -> Self {
        Self(message: message, hint: hint, exitCode: DeviceExit.badState)
    }
    static func network(_ message: String, hint: String? = nil) -> Self { Self(message: message, hint: hint, exitCode: DeviceExit.network) }
    static func notFound(_ message: String, hint: String? = nil) -> Self {
        Self(message: message, hint: hint, exitCode: DeviceExit.notFound)
    }
    static func failure(_ message: String, hint: String? = nil) -> Self { Self(message: message, hint: hint, exitCode: DeviceExit.failure) }

    /// The failure of a store error: which exit code, and what to do about it.
    init(_ error: OfflineStoreError) {
        message = error.description
        switch error {
        case .createdByNewerBuild, .belongsToAnotherAccount, .keyUnavailable, .keyMismatch, .signedOut, .invalidExtension, .pendingWrites,
            .invalidOutboxState, .invalidResolution, .rowAlreadyExists:
            exitCode = DeviceExit.badState
        case .unknownContract, .unknownField, .fieldNotQueryable, .invalidValue, .notWritable, .invalidPreference:
            exitCode = DeviceExit.usage
        case .file(let refusal):
            (exitCode, hint) = Self.exit(refusal)
        case .rowNotFound, .outboxEntryNotFound, .conflictNotFound:
            exitCode = DeviceExit.notFound
        case .readOnlyUntilSync:
            exitCode = DeviceExit.readOnly
            hint = "run `sync-device sync` once the network is back; nothing you recorded is lost"
        case .notADatabase, .cannotOpen, .databaseEncryptionUnavailable, .unreadableRow, .unsealFailed, .partialRowNotHeld, .database, .fileSystem:
            exitCode = DeviceExit.failure
        }
        if case .pendingWrites = error { hint = "run `sync-device sync`, or `sync-device logout --force` to discard them" }
    }
}

extension DeviceFailure {
    /// The exit code of a file the store refused, and what to do about it.
    static func exit(_ refusal: FileError) -> (ExitCode, String?) {
        switch refusal {
        case .tooLarge(_, _, _, let limit):
            return (DeviceExit.fileRefused, "the field takes files of at most \(Wording.bytes(limit)); nothing was queued")
        case .contentTypeNotAllowed(_, _, _, let allowed):
            return (
                DeviceExit.fileRefused,
                "give a file of type \(allowed.joined(separator: ", ")) (`@FILE;type=TYPE` or --content-type when its name does not say); nothing was queued"
            )
        case .contentMismatch:
            return (DeviceExit.fileRefused, "the server checks a file's first bytes against its type; nothing was queued")
        case .invalidReference:
            return (DeviceExit.fileRefused, nil)
        case .unreadable:
            return (DeviceExit.noInput, nil)
        case .insufficientSpace:
            return (DeviceExit.badState, "free space on the device (`sync-device cache`), then try again")
        case .notImported:
            return (DeviceExit.failure, nil)
        }
    }

    /// The failure of a file download (`sync-device file`): 3 for the network or a file that
    /// did not match its hash, 6 for a file the server does not hold or lets this user read.
    init(_ error: FileDownloadError) {
        switch error {
        case .transport(.http(404, _, _)), .transport(.http(410, _, _)):
            self.init(
                message: "the server does not hold this file, or this user may not read it",
                hint: "the row's writer may not have synced yet: `sync-device sync` on that device first", exitCode: DeviceExit.notFound)
        case .transport(let transport):
            var failure = transport.failure
            failure.message = "the file could not be downloaded: " + failure.message
            failure.hint = failure.hint ?? "run again: the download resumes where it stopped"
            self = failure
        case .hashMismatch:
            self.init(
                message: error.description, hint: "the bytes were deleted; run again to download the file anew", exitCode: DeviceExit.network)
        case .store(let storeError):
            self.init(storeError)
        }
    }

    /// The failure of an assessment call: which exit code, and what to do about it.
    init(_ error: AssessmentError) {
        let message = error.description
        switch error {
        case .unknownAssessment:
            self.init(message: message, hint: "`sync-device sync` downloads the content", exitCode: DeviceExit.notFound)
        case .closed:
            self.init(message: message, hint: "the server refuses submissions after the last day", exitCode: DeviceExit.badState)
        case .attemptInProgress, .attemptNotInProgress, .timeLimitReached:
            self.init(message: message, exitCode: DeviceExit.badState)
        case .invalidChoice:
            self.init(message: message, exitCode: DeviceExit.usage)
        case .store(let storeError):
            self.init(storeError)
        }
    }

    /// The failure of a download: which exit code, and what to do about it.
    init(_ error: AssetError) {
        let message = error.description
        switch error {
        case .notAvailableOffline:
            self.init(
                message: message,
                hint: "download it while the device is online (`sync-device offline off`); what was downloaded is kept and resumed",
                exitCode: DeviceExit.network
            )
        case .unknownUnit:
            self.init(message: message, hint: "`sync-device units` lists the units", exitCode: DeviceExit.notFound)
        case .unknownAsset:
            self.init(message: message, hint: "`sync-device sync` fetches the content", exitCode: DeviceExit.notFound)
        case .notPublished:
            self.init(message: message, hint: "the server has not published its file yet; sync, then try again", exitCode: DeviceExit.notFound)
        case .checksumMismatch:
            self.init(
                message: message, hint: "the server's file is not the one its metadata describes; sync, then download again",
                exitCode: DeviceExit.network
            )
        case .http, .invalidResponse:
            self.init(message: message, exitCode: DeviceExit.network)
        case .cancelled:
            self.init(message: message, exitCode: DeviceExit.failure)
        case .insufficientSpace:
            self.init(message: message, hint: "free space on the device, or `sync-device cache delete UNIT`", exitCode: DeviceExit.badState)
        case .store(let storeError):
            self.init(storeError)
        }
    }
}

/// A command that reports its failures the same way as every other: a message on standard error
/// and the documented exit code.
protocol DeviceCommand: AsyncParsableCommand {
    func execute() async throws
}

extension DeviceCommand {
    func run() async throws {
        do {
            try await execute()
        } catch {
            let failure: DeviceFailure
            switch error {
            case let known as DeviceFailure: failure = known
            case let store as OfflineStoreError: failure = DeviceFailure(store)
            case let download as AssetError: failure = DeviceFailure(download)
            case let assessment as AssessmentError: failure = DeviceFailure(assessment)
            case let download as FileDownloadError: failure = DeviceFailure(download)
            default: throw error
            }
            Console.fail(failure)
            throw failure.exitCode
        }
    }
}
