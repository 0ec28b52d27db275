public import Foundation
package import Logging
import NIOConcurrencyHelpers
import NIOCore
package import NIOSSL
import ServiceLifecycle

/// The files of the server's TLS certificate (``ServerConfiguration/tls``).
public struct TLSFiles: Sendable, Hashable {
    /// PEM: the server's certificate first, then the intermediates that chain it to a root.
    public var certificateChain: URL
    /// PEM: the private key of the first certificate of ``certificateChain``.
    public var privateKey: URL
    /// How often the files are checked for a change (2 s): a changed pair serves the next
    /// connections, with no restart.
    public var reloadInterval: Duration

    /// The two PEM files, checked for a change every `reloadInterval`.
    public init(certificateChain: URL, privateKey: URL, reloadInterval: Duration = .seconds(2)) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.reloadInterval = reloadInterval
    }
}

/// Why a certificate or key file cannot serve; each names the file.
public struct TLSFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong, naming the file.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The certificate chain and key the server presents, read from ``TLSFiles`` and read again when
/// the files change.
///
/// Every TLS handshake takes the pair current at that moment, through swift-nio-ssl's
/// `sslContextCallback` (its hook for choosing a certificate per handshake): new connections get
/// a replaced certificate while open ones keep theirs. A pair that does not load, or whose key does
/// not match its certificate, is refused at start and, later, logged and skipped: the previous
/// pair keeps serving until the files hold a good one.
package final class ServerCertificate: Service, Sendable {
    package struct Pair: Sendable {
        package let chain: [NIOSSLCertificate]
        package let key: NIOSSLPrivateKey
    }

    /// What identifies one version of the files without reading them: a changed stamp is read.
    struct Stamp: Hashable {
        var modified: Date?
        var size: Int?
        var inode: Int?

        init(_ url: URL) {
            let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
            modified = attributes?[.modificationDate] as? Date
            size = (attributes?[.size] as? NSNumber)?.intValue
            inode = (attributes?[.systemFileNumber] as? NSNumber)?.intValue
        }
    }

    package let files: TLSFiles
    private let logger: Logger
    private let state: NIOLockedValueBox<(pair: Pair, stamps: [Stamp])>

    /// Reads and checks the pair; throws when it cannot serve.
    package init(files: TLSFiles, logger: Logger = Logger(label: "outpost.tls")) throws(TLSFileError) {
        self.files = files
        self.logger = logger
        let stamps = Self.stamps(files)
        state = NIOLockedValueBox((try Self.load(files), stamps))
    }

    /// The pair new handshakes present.
    package var current: Pair { state.withLockedValue { $0.pair } }

    /// A server TLS configuration whose handshakes present ``current``.
    package func tlsConfiguration() -> TLSConfiguration {
        let pair = current
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: pair.chain.map { .certificate($0) }, privateKey: .privateKey(pair.key))
        configuration.minimumTLSVersion = .tlsv12
        configuration.sslContextCallback = { [state] _, promise in
            let pair = state.withLockedValue { $0.pair }
            var override = NIOSSLContextConfigurationOverride()
            override.certificateChain = pair.chain.map { .certificate($0) }
            override.privateKey = .privateKey(pair.key)
            promise.succeed(override)
        }
        return configuration
    }

    /// What one check of the files found.
    package enum Reload: Equatable, Sendable {
        case unchanged
        case reloaded
        /// The files changed but do not make a pair that can serve; the previous one is kept.
        case refused(String)
    }

    /// Reads the files again when they changed since the last read.
    @discardableResult
    package func reloadIfChanged() -> Reload {
        let stamps = Self.stamps(files)
        guard stamps != state.withLockedValue({ $0.stamps }) else { return .unchanged }
        do {
            let pair = try Self.load(files)
            state.withLockedValue { $0 = (pair, stamps) }
            logger.notice("TLS certificate reloaded from \(files.certificateChain.path); new connections present it")
            return .reloaded
        } catch {
            // Remembered as seen, so a broken pair is logged once, not every interval; a further
            // change of either file is read again.
            state.withLockedValue { $0.stamps = stamps }
            logger.error("TLS certificate not reloaded, the previous one keeps serving: \(error.description)")
            return .refused(error.description)
        }
    }

    /// Checks the files every ``TLSFiles/reloadInterval`` until the server shuts down.
    package func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: self.files.reloadInterval)
                } catch {
                    return
                }
                self.reloadIfChanged()
            }
        }
    }

    private static func stamps(_ files: TLSFiles) -> [Stamp] {
        [Stamp(files.certificateChain), Stamp(files.privateKey)]
    }

    /// The pair in `files`, checked by building a TLS context with it (BoringSSL refuses a key
    /// that is not the certificate's).
    static func load(_ files: TLSFiles) throws(TLSFileError) -> Pair {
        let chainBytes = try read(files.certificateChain, what: "TLS certificate")
        let keyBytes = try read(files.privateKey, what: "TLS private key")
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(chainBytes)
        } catch {
            throw TLSFileError("the TLS certificate file \(files.certificateChain.path) is not PEM certificates: \(error)")
        }
        guard !chain.isEmpty else {
            throw TLSFileError("the TLS certificate file \(files.certificateChain.path) holds no PEM certificate")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(bytes: keyBytes, format: .pem)
        } catch {
            throw TLSFileError("the TLS private key file \(files.privateKey.path) is not a PEM private key: \(error)")
        }
        do {
            _ = try NIOSSLContext(
                configuration: .makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key)))
        } catch {
            throw TLSFileError(
                "the TLS private key in \(files.privateKey.path) does not match the certificate in \(files.certificateChain.path): \(error)")
        }
        return Pair(chain: chain, key: key)
    }

    private static func read(_ url: URL, what: String) throws(TLSFileError) -> [UInt8] {
        do {
            return Array(try Data(contentsOf: url))
        } catch {
            let reason = (error as NSError).localizedDescription
            throw TLSFileError("cannot read the \(what) file \(url.path): \(reason)")
        }
    }
}
