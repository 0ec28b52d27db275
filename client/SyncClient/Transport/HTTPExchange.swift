public import Foundation

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// Sends one HTTP request and answers its response: what ``URLSessionTransport`` sends its
/// requests through when it is given one instead of its URLSession (the `SyncClientNIO` module's
/// `PinnedHTTPSExchange`, which checks ``PublicKeyPins`` on every connection).
public protocol HTTPExchange: Sendable {
    /// The answer to `request` with its whole body, decompressed when it came compressed. Throws
    /// ``TransportError/network(_:)`` (or another ``TransportError``) when no answer came.
    func send(_ request: URLRequest) async throws(TransportError) -> (Data, HTTPURLResponse)
}
