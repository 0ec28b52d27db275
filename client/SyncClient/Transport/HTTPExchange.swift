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

    /// The answer to `request` with its body delivered as it arrives, for the live channel
    /// (`GET /sync/v1/live`, server-sent events that last as long as the connection), or `nil`
    /// when this exchange cannot stream (the default): ``URLSessionTransport/liveEvents()``
    /// then opens no channel and the engine syncs on its timer.
    ///
    /// The response is answered once its head has arrived, whatever its status (an error
    /// answer's body comes through the stream too). The stream yields the body's bytes in the
    /// pieces they arrived in, ends when the server ends the body or closes the connection,
    /// and fails when the connection fails. Ending it from the consumer's side (cancelling
    /// the task iterating it) must close the connection. Make the same checks
    /// as ``send(_:)`` before anything is written, and throw as it does when no answer came.
    func stream(_ request: URLRequest) async throws(TransportError) -> (HTTPURLResponse, AsyncThrowingStream<Data, any Error>)?
}

extension HTTPExchange {
    /// No streaming: the live channel is not opened through this exchange.
    public func stream(_ request: URLRequest) async throws(TransportError) -> (HTTPURLResponse, AsyncThrowingStream<Data, any Error>)? {
        nil
    }
}
